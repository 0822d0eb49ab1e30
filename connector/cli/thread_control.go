package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

func (a *app) threadRunCmd(use string) *cobra.Command {
	var prompt string
	cmd := &cobra.Command{
		Use:   use + " <name> [--prompt <text>]",
		Short: "Start a new thread executing a workflow",
		Args:  exactArgs(1, 1, "run requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := registry.ValidateName(args[0]); err != nil {
				return err
			}
			return a.callEngine(cmd, true, func(storage.Layout) (string, error) {
				reg, err := a.loadRegistry()
				if err != nil {
					return "", err
				}
				if _, ok := reg.Get(args[0]); !ok {
					return "", unknownWorkflow("workflow not registered", reg, args[0])
				}
				return args[0], nil
			}, func(c *host.Client, name string) (string, error) {
				return c.Run(host.RunRequest{Workflow: name, Prompt: prompt})
			})
		},
	}
	cmd.Flags().StringVar(&prompt, "prompt", "", "the thread's prompt")
	return cmd
}

func (a *app) threadPsCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List running and pausing threads (not paused ones)",
		Args:  exactArgs(0, 0, "", "ps takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			l, err := a.layout()
			if err != nil {
				return err
			}
			var list []host.RunningThread
			if c, err := host.Dial(l); err == nil {
				if list, err = c.List(); err != nil {
					return err
				}
			} else if errors.Is(err, host.ErrRefused) {
				return err // a host runs these threads, but not for this user
			}
			// Running means a role is at work: a paused thread waits (thread
			// list shows it); one still pausing finishes its role first. One
			// starting is not to be found yet (host.RunningThread.Starting).
			list = slices.DeleteFunc(list, func(r host.RunningThread) bool { return r.Status == threads.StatusPaused || r.Starting })
			list = api.Window(list, lf.offset, lf.limit)
			if lf.json {
				if list == nil {
					list = []host.RunningThread{}
				}
				return writeJSON(a.out(), list)
			}
			if len(list) == 0 {
				fmt.Fprintln(a.out(), "(no running threads)")
			}
			for _, r := range list {
				name := r.Workflow
				if name == "" {
					name = "(unknown)"
				}
				fmt.Fprintf(a.out(), "%s\t%s\t%s\n", r.ThreadID, r.BundleHash, name)
			}
			return nil
		},
	}
	lf.register(cmd)
	return cmd
}

// callEngine is what the thread-control commands share: open the storage
// root, let target check the arguments against it and name what to act
// on (a thread, or the workflow to run), reach the root's engine host —
// started on demand when start, else only one already running (pause: with
// no host, no thread runs to be paused) — then call it and print the line
// it answers. A thread cmd runs, forks or resumes gets cmd's environment
// and working directory (engineClient).
func (a *app) callEngine(cmd *cobra.Command, start bool, target func(storage.Layout) (string, error), call func(c *host.Client, id string) (string, error)) error {
	l, err := a.layout()
	if err != nil {
		return err
	}
	id, err := target(l)
	if err != nil {
		return err
	}
	var c *host.Client
	if start {
		c, err = a.engineClient(l, cmd)
	} else if c, err = host.Dial(l); errors.Is(err, host.ErrNoHost) {
		return fmt.Errorf("thread not running: %s", id)
	}
	if err != nil {
		return err
	}
	line, err := call(c, id)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.out(), line)
	return nil
}

// threadID is the target of the commands that act on one thread: the
// record an id (or a unique prefix of one) names.
func threadID(l storage.Layout, arg string) (string, error) {
	rec, err := resolveThread(l, arg)
	return rec.ThreadID, err
}

// controlCmd builds kill, pause and resume: resolve the thread, ask the
// host, print "<verb> sent for thread <id>".
func (a *app) controlCmd(verb, short string, needsHost bool, act func(*host.Client, string) error) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " <thread-id>",
		Short: short,
		Args:  exactArgs(1, 1, verb+" requires <thread-id>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.callEngine(cmd, needsHost, func(l storage.Layout) (string, error) {
				return threadID(l, args[0])
			}, func(c *host.Client, id string) (string, error) {
				if err := act(c, id); err != nil {
					return "", err
				}
				return verb + " sent for thread " + id, nil
			})
		},
	}
}

func (a *app) threadForkCmd() *cobra.Command {
	var fromRole string
	var step int
	cmd := &cobra.Command{
		Use:   "fork <thread-id> [--from-role <role> | --step <n>]",
		Short: "Fork a thread, optionally from a specific role or step",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("fork requires <thread-id>")
			}
			if len(args) > 1 {
				return fmt.Errorf("unexpected argument: %s", args[1])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("from-role") && strings.TrimSpace(fromRole) == "" {
				return errors.New("--from-role requires a role name")
			}
			if cmd.Flags().Changed("step") {
				if step < 1 {
					return fmt.Errorf("--step must be 1 or more (role steps are counted from 1), not %d", step)
				}
				if cmd.Flags().Changed("from-role") {
					return errors.New("--step and --from-role choose the fork point two ways: give one")
				}
			}
			return a.callEngine(cmd, true, func(l storage.Layout) (string, error) {
				return threadID(l, args[0])
			}, func(c *host.Client, id string) (string, error) {
				return c.Fork(id, host.ForkRequest{FromRole: fromRole, Step: step})
			})
		},
	}
	cmd.Flags().StringVar(&fromRole, "from-role", "", "keep the steps up to and including this role's first step (default: retry the last role)")
	cmd.Flags().IntVar(&step, "step", 0, "keep the steps up to and including this one (counted from 1, as thread show lists them): a role that ran twice can be forked from its second run")
	return cmd
}
