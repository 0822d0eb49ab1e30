// Package cli implements the uncaged-workflow command line: the command
// tree, argument checks and output formats. Command names, arguments and
// stdout lines follow the original TypeScript CLI so scripts keep working;
// every list and show command also has --json.
package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/envflag"
	"github.com/uncaged/workflow/shared/logging"
)

// Env is the process environment a command runs in; tests pass buffers and
// a map-backed Getenv.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string

	// liveSlowPoll and livePolledEvery, set by tests, replace live's
	// timers (0: liveSlowPoll, livePolledEvery).
	liveSlowPoll, livePolledEvery time.Duration
}

// exitError carries an exit code without a message (the message, if any,
// has been printed already).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Run executes one command line and returns the process exit code: 0 on
// success, 1 on any error (printed on stderr), a usage error included;
// commands that report an outcome (live) may return others.
func Run(args []string, env Env) int {
	a := &app{env: env, args: args}
	root := a.root()
	root.SetArgs(args)
	err := root.Execute()
	a.closeLog()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(env.Stderr, err.Error())
	return 1
}

// app is what every command needs: where the storage root is and where to
// write.
type app struct {
	env Env
	// logFlags are the root's --log-level and --log-format; log is what
	// they parse to, set before any command runs.
	logFlags logging.Flags
	log      logging.Options
	// logged is the logger built from log on first use, writing through
	// logQueue.
	logOnce  sync.Once
	logQueue *logging.Queue
	logged   *slog.Logger
	// storageRoot is the root's --storage-root, set from its variables
	// when not given; "" means the default under the home directory.
	storageRoot string
	// args is the command line being run, which a flag error reads to tell
	// a mistyped subcommand from a mistyped flag.
	args []string
	// allowOrigin is --allow-origin of the commands that serve the API,
	// and origins what it parses to, set before the API is built.
	allowOrigin []string
	origins     api.Origins
}

// logger is the one way commands get their logger, so the root's flags
// decide every command's level and format. Its lines go through one
// logging.Queue (a request log's line per request is no system call of
// its own), which Run flushes before it returns.
func (a *app) logger() *slog.Logger {
	a.logOnce.Do(func() {
		a.logQueue = logging.NewQueue(a.env.Stderr)
		a.logged = a.log.NewQueued(a.logQueue)
	})
	return a.logged
}

// closeLog writes out what the logger has queued.
func (a *app) closeLog() {
	if a.logQueue != nil {
		a.logQueue.Close()
	}
}

// EnvPrefix starts the name of every variable that configures
// uncaged-workflow itself (not the workflows it runs).
const EnvPrefix = "UNCAGED_WORKFLOW_"

// layout is the storage root every command that uses one opens: created
// here when missing, before anything writes below it, so that a new root
// is private from the start; refused when another user could change it
// (storage.Layout.Check), before anything is read from it or sent to its
// engine host.
func (a *app) layout() (storage.Layout, error) {
	l, err := a.resolveLayout()
	if err != nil {
		return l, err
	}
	return l, l.Open()
}

// lookLayout is layout without creating the root, for commands that only
// look (status, doctor): a root that is not there passes, one that
// another user could change is refused all the same.
func (a *app) lookLayout() (storage.Layout, error) {
	l, err := a.resolveLayout()
	if err != nil {
		return l, err
	}
	return l, l.Check()
}

// resolveLayout names the storage root: --storage-root (or its
// variables, which envflag has applied to it), else the default one.
func (a *app) resolveLayout() (storage.Layout, error) {
	root := a.storageRoot
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return storage.Layout{}, errors.New("cannot find the home directory for the default storage root; pass --storage-root or set " + storage.EnvRoot)
		}
		root = storage.DefaultRoot(home)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return storage.Layout{}, err
	}
	return storage.Layout{Root: abs}, nil
}

// storageRootFlag is the root's flag naming the storage root.
const storageRootFlag = "storage-root"

func (a *app) out() io.Writer { return a.env.Stdout }

// stderrIsTerminal says whether progress lines are worth drawing.
func (a *app) stderrIsTerminal() bool {
	f, ok := a.env.Stderr.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const groupAnnotation = "uncaged-workflow/section"

func newRoot(env Env) *cobra.Command { return (&app{env: env}).root() }

// root is the command tree over a.
func (a *app) root() *cobra.Command {
	env := a.env
	root := &cobra.Command{
		Use:           "uncaged-workflow",
		Short:         "workflow engine CLI",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		// Like the original: no arguments prints the usage and fails. An
		// unknown command is one line with the nearest command and a hint.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(env.Stdout, rootUsage(cmd))
				return exitError{1}
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SetFlagErrorFunc(flagError(a.args))
	a.logFlags.Register(root.PersistentFlags(), EnvPrefix)
	root.PersistentFlags().StringVar(&a.storageRoot, storageRootFlag, "", "the storage root: workflows, threads and everything they store")
	envflag.Bind(root.PersistentFlags(), storageRootFlag, storage.EnvRoot, storage.EnvLegacyRoot)
	envflag.DocDefault(root.PersistentFlags(), storageRootFlag, "`~/.uncaged/workflow`")
	// Flags bound to variables take them here, once the command line is
	// parsed and before any command runs.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := envflag.Apply(cmd.Flags(), env.Getenv); err != nil {
			return err
		}
		a.log = a.logFlags.Options()
		return nil
	}
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		if cmd == root {
			fmt.Fprint(env.Stdout, rootUsage(cmd))
			return
		}
		fmt.Fprint(env.Stdout, commandHelp(cmd))
	})
	run, live := a.threadRunCmd("run"), a.liveCmd("live")
	run.Short, live.Short = "→ thread run", "→ thread live"
	for _, c := range []*cobra.Command{run, live} {
		c.Annotations = map[string]string{groupAnnotation: "Shortcuts:"}
	}
	connect, serve := a.connectCmd(), a.serveCmd()
	for _, c := range []*cobra.Command{connect, serve} {
		c.Annotations = map[string]string{groupAnnotation: "Gateway:"}
	}
	root.AddCommand(
		a.workflowCmd(),
		a.threadCmd(),
		a.casCmd(),
		a.initCmd(), a.buildCmd(), a.setupCmd(), a.skillCmd(),
		run, live,
		connect, serve,
		a.engineCmd(),
		a.statusCmd(), a.doctorCmd(), a.serviceCmd(),
		a.versionCmd(),
	)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Annotations = map[string]string{groupAnnotation: "Shell:"}
		}
	}
	return root
}

// group builds a command group: without a subcommand it lists its
// subcommands and fails; an unknown subcommand is an error naming it and
// the nearest one.
func group(use, section, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:         use,
		Short:       short,
		Annotations: map[string]string{groupAnnotation: section},
		Args:        cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(cmd.OutOrStdout(), groupHelp(cmd))
				return exitError{1}
			}
			return unknownCommand(cmd, args[0])
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// rootUsage is the full usage: one section per group, each row the command
// with its arguments and what it does, columns aligned.
func rootUsage(root *cobra.Command) string {
	type row struct{ left, right string }
	type section struct {
		title string
		rows  []row
	}
	var sections []*section
	byTitle := map[string]*section{}
	add := func(title string, r row) {
		s, ok := byTitle[title]
		if !ok {
			s = &section{title: title}
			byTitle[title] = s
			sections = append(sections, s)
		}
		s.rows = append(s.rows, r)
	}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		title := c.Annotations[groupAnnotation]
		if title == "" {
			title = "Other:"
		}
		subs := visible(c)
		if len(subs) == 0 || c.Name() == "completion" {
			add(title, row{strings.TrimSpace(c.Use), c.Short})
			continue
		}
		for _, s := range subs {
			add(title, row{c.Name() + " " + s.Use, s.Short})
		}
	}
	// Descriptions line up after the longest usage, except that a usage
	// longer than maxUsageColumn (setup's flag list) gets its description
	// on the next line instead of pushing every row off the screen.
	const maxUsageColumn = 56
	width := 0
	for _, s := range sections {
		for _, r := range s.rows {
			if len(r.left) <= maxUsageColumn {
				width = max(width, len(r.left))
			}
		}
	}
	var b strings.Builder
	b.WriteString("uncaged-workflow — workflow engine CLI\n\n")
	for _, s := range sections {
		b.WriteString(s.title + "\n")
		for _, r := range s.rows {
			if len(r.left) > width {
				fmt.Fprintf(&b, "  %s\n  %-*s  %s\n", r.left, width, "", r.right)
				continue
			}
			fmt.Fprintf(&b, "  %-*s  %s\n", width, r.left, r.right)
		}
		b.WriteString("\n")
	}
	b.WriteString("Use <command> --help for subcommand details.\n\n")
	b.WriteString("Environment variables:\n")
	fmt.Fprintf(&b, "  %-31s  %s\n", storage.EnvRoot, "storage root (takes priority; --storage-root wins over both)")
	fmt.Fprintf(&b, "  %-31s  %s\n", storage.EnvLegacyRoot, "storage root (default ~/.uncaged/workflow)")
	return b.String()
}

// groupHelp lists a group's subcommands the way the original does.
func groupHelp(cmd *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s subcommands:\n\n", cmd.Name())
	for _, s := range visible(cmd) {
		fmt.Fprintf(&b, "  uncaged-workflow %s %s\n      %s\n", cmd.Name(), s.Use, s.Short)
	}
	return b.String()
}

// commandHelp is the help of a group (its subcommand list) or of one
// command (usage, description and flags).
func commandHelp(cmd *cobra.Command) string {
	if len(visible(cmd)) > 0 {
		return groupHelp(cmd)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s\n", cmd.UseLine(), cmd.Short)
	if cmd.Long != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(cmd.Long))
	}
	if flags := cmd.LocalFlags().FlagUsages(); flags != "" {
		fmt.Fprintf(&b, "\nflags:\n%s", flags)
	}
	return b.String()
}

func visible(cmd *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range cmd.Commands() {
		if !s.Hidden && s.Name() != "help" {
			out = append(out, s)
		}
	}
	return out
}

// exactArgs checks the positional argument count with the original's
// messages: missing arguments print `missing`, extra ones "too many
// arguments" (or `extra` when given).
func exactArgs(min, max int, missing, extra string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < min {
			return errors.New(missing)
		}
		if max >= 0 && len(args) > max {
			if extra == "" {
				extra = "too many arguments"
			}
			return errors.New(extra)
		}
		return nil
	}
}

// lazyRegexp compiles expr the first time a command needs it: a pattern
// compiled at package level costs every start of the CLI, `version`
// included.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Commands are listed in the order they are added — the original's order
// (workflow, thread, cas, init, setup, skill, ...) — not alphabetically.
func init() { cobra.EnableCommandSorting = false }
