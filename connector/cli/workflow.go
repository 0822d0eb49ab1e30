package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
)

func (a *app) workflowCmd() *cobra.Command {
	return group("workflow", "Workflow registry:", "Manage registered workflows",
		a.workflowAddCmd(),
		a.workflowListCmd(),
		a.workflowShowCmd(),
		a.workflowRmCmd(),
		a.workflowHistoryCmd(),
		a.workflowRollbackCmd(),
	)
}

func (a *app) workflowAddCmd() *cobra.Command {
	var types string
	cmd := &cobra.Command{
		Use:   "add <name> <file.yaml|.esm.js> [--types <path>]",
		Short: "Register a YAML workflow or a JavaScript bundle",
		Long: `Register a workflow in the registry under <name>, from either
  - a YAML workflow (<file>.yaml or .yml): roles, agents, output schemas and a
    graph; relative agent paths are resolved against the file's directory, or
  - a JavaScript bundle (<file>.esm.js), e.g. from uncaged-workflow build; its
    <stem>.d.ts, when beside it, is stored too (or name one with --types).
    A package it imports that the engine does not provide (one the
    original's build left external) is bundled in from node_modules beside
    the file, as the original resolved it when a bundle was added.
Every check runs before anything is written. Adding the version a name
already points at changes nothing and says so; a new version becomes current
and the old one goes to its history (workflow history, workflow rollback).
The YAML format: uncaged-workflow skill author.`,
		Args: exactArgs(2, 2, "add requires <name> <file>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			typesGiven := cmd.Flags().Changed("types")
			if typesGiven && types == "" {
				return errors.New("missing value for --types")
			}
			return a.addWorkflow(args[0], args[1], types)
		},
	}
	cmd.Flags().StringVar(&types, "types", "", "types file to store with the bundle (default: <stem>.d.ts beside it)")
	return cmd
}

// addWorkflow registers a bundle file. Every check runs before anything is
// written, so a rejected bundle leaves the store as it was.
func (a *app) addWorkflow(name, file, typesPath string) error {
	if err := registry.ValidateName(name); err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	st, err := os.Stat(abs)
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("file not found: %s", file)
	}
	base := filepath.Base(abs)
	switch {
	case strings.HasSuffix(base, ".ts") && !strings.HasSuffix(base, ".d.ts"):
		return errors.New("build your .ts file first, then add the .esm.js")
	case isYAMLWorkflowFile(base):
		if typesPath != "" {
			return errors.New("--types applies to .esm.js bundles only")
		}
		return a.addYAMLWorkflow(name, abs)
	case !strings.HasSuffix(base, ".esm.js"):
		return errors.New(`workflow file must end with ".esm.js" (a bundle) or ".yaml"/".yml" (a YAML workflow)`)
	}
	bundle, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(bundle))) == 0 {
		return fmt.Errorf("workflow bundle %s is empty", file)
	}
	if !utf8.Valid(bundle) {
		return fmt.Errorf("workflow bundle %s is not valid UTF-8 text", file)
	}
	l, err := a.registryLayout()
	if err != nil {
		return err
	}
	bundle, bundled, err := resolveBundleImports(bundle, abs)
	if err != nil {
		return err
	}
	if len(bundled) > 0 {
		fmt.Fprintf(a.env.Stderr, "bundled %s from node_modules into the registered bundle\n", strings.Join(bundled, ", "))
	}
	loaded, err := jsrt.Load(bundle, base, jsrt.Options{})
	if err != nil {
		return err
	}
	descriptor, err := loaded.Descriptor().MarshalYAML()
	if err != nil {
		return err
	}
	var typesData []byte
	if typesPath != "" {
		if typesData, err = os.ReadFile(typesPath); err != nil {
			return fmt.Errorf("types file not found: %s", typesPath)
		}
	} else {
		def := filepath.Join(filepath.Dir(abs), strings.TrimSuffix(base, ".esm.js")+".d.ts")
		typesData, err = os.ReadFile(def)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(a.env.Stderr, "optional types file not found (%s); skipped\n", filepath.Base(def))
			typesData = nil
		} else if err != nil {
			return err
		}
	}
	hash := ids.HashBytes(bundle)
	files := []versionFile{{l.BundleFile(hash), "bundle", bundle}, {l.DescriptorFile(hash), "descriptor", descriptor}}
	if typesData != nil {
		files = append(files, versionFile{l.TypesFile(hash), "types file", typesData})
	}
	return a.registerVersion(l.RegistryFile(), name, base, hash, files...)
}

// registryLayout is the storage layout once the registry is known to be
// readable, so that nothing is stored for a version whose registration
// would then fail.
func (a *app) registryLayout() (storage.Layout, error) {
	l, err := a.layout()
	if err != nil {
		return l, err
	}
	if _, err := registry.Load(l.RegistryFile()); err != nil {
		return l, err
	}
	return l, nil
}

// versionFile is one file a registered workflow version keeps.
type versionFile struct {
	path, what string
	data       []byte
}

// errUnchanged ends a registry update that would save what is there.
var errUnchanged = errors.New("unchanged")

// registerVersion stores a version's files, then points name at hash: the
// registry never names a version whose files are not all in place.
func (a *app) registerVersion(registryFile, name, base, hash string, files ...versionFile) error {
	for _, f := range files {
		if err := registry.StoreFile(f.path, f.what, f.data); err != nil {
			return err
		}
	}
	err := registry.Update(registryFile, func(r *registry.Registry) error {
		if !r.Register(name, hash, time.Now().UnixMilli()) {
			return errUnchanged // nothing to save
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		fmt.Fprintf(a.out(), "workflow %q unchanged: %s is already its current version (%s)\n", name, base, hash)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out(), "registered workflow %q from %s as %s\n", name, base, hash)
	return nil
}

// workflowRow is one workflow in `workflow list --json`.
type workflowRow struct {
	Name      string `json:"name"`
	Hash      string `json:"hash"`
	Timestamp int64  `json:"timestamp"`
	Versions  int    `json:"versions"`
}

func (a *app) workflowListCmd() *cobra.Command {
	var lf listFlags
	var of outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List all registered workflows",
		Long: `Registered workflows: name, current hash, number of versions, and when the
current version was registered. -o wide adds the exact time (RFC 3339, local
zone) and the kind (yaml or bundle); --json (or -o json) prints the
timestamp in milliseconds, for scripts.

When stdout is not a terminal and no -o is given, it prints the original's
lines instead, for the scripts that parse them: <name> TAB <hash> TAB
<registered, ms since the epoch>, by name, no header. -o table keeps the
table in a pipe.`,
		Args: exactArgs(0, 0, "", "list takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			if err := of.apply(&lf, true, a.out()); err != nil {
				return err
			}
			r, err := a.loadRegistry()
			if err != nil {
				return err
			}
			rows := []workflowRow{}
			for _, name := range r.Names() {
				e, _ := r.Get(name)
				rows = append(rows, workflowRow{Name: name, Hash: e.Hash, Timestamp: e.Timestamp, Versions: 1 + len(e.History)})
			}
			rows = api.Window(rows, lf.offset, lf.limit)
			if lf.json {
				return writeJSON(a.out(), rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(a.out(), "(no workflows registered)")
				return nil
			}
			if of.lines {
				return writeWorkflowLines(a.out(), rows)
			}
			l, err := a.layout()
			if err != nil {
				return err
			}
			return writeWorkflowTable(a.out(), l, rows, of.wide(), time.Now())
		},
	}
	lf.register(cmd)
	of.register(cmd, true)
	return cmd
}

// writeWorkflowLines prints the original's `workflow list` lines:
// "<name>\t<hash>\t<registered, ms since the epoch>", by name.
func writeWorkflowLines(w io.Writer, rows []workflowRow) error {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s\t%s\t%d\n", r.Name, r.Hash, r.Timestamp)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeWorkflowTable prints rows as the table `workflow list` shows people.
func writeWorkflowTable(w io.Writer, l storage.Layout, rows []workflowRow, wide bool, now time.Time) error {
	header := []string{"NAME", "HASH", "VERSIONS", "UPDATED"}
	if wide {
		header = append(header, "REGISTERED", "KIND")
	}
	t := newTable(w, header...)
	for _, row := range rows {
		cells := []string{row.Name, row.Hash, strconv.Itoa(row.Versions), relativeTime(time.UnixMilli(row.Timestamp), now)}
		if wide {
			kind := "bundle"
			if _, err := os.Stat(l.YAMLWorkflowFile(row.Hash)); err == nil {
				kind = "yaml"
			}
			cells = append(cells, localTime(row.Timestamp), kind)
		}
		t.row(cells...)
	}
	return t.flush()
}

func (a *app) loadRegistry() (*registry.Registry, error) {
	l, err := a.layout()
	if err != nil {
		return nil, err
	}
	r, err := registry.Load(l.RegistryFile())
	if err != nil {
		return nil, err
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(a.env.Stderr, "warning: "+w)
	}
	return r, nil
}

func (a *app) workflowShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <name>",
		Short: "Show details of a registered workflow",
		Args:  exactArgs(1, 1, "show requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.loadRegistry()
			if err != nil {
				return err
			}
			e, ok := r.Get(args[0])
			if !ok {
				return unknownWorkflow("workflow not found", r, args[0])
			}
			if asJSON {
				return writeJSON(a.out(), struct {
					Name string `json:"name"`
					registry.Entry
				}{args[0], e})
			}
			b, err := registry.ShowYAML(args[0], e)
			if err != nil {
				return err
			}
			_, err = a.out().Write(b)
			return err
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

func (a *app) workflowRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <name>",
		Aliases: []string{"remove"},
		Short:   "Remove a workflow from the registry",
		Args:    exactArgs(1, 1, "rm requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.layout()
			if err != nil {
				return err
			}
			err = registry.Update(l.RegistryFile(), func(r *registry.Registry) error {
				if _, ok := r.Get(args[0]); !ok {
					return unknownWorkflow("workflow not registered", r, args[0])
				}
				return r.Unregister(args[0])
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "removed workflow %q from registry\n", args[0])
			return nil
		},
	}
}

func (a *app) workflowHistoryCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history <name>",
		Short: "Show version history of a workflow",
		Args:  exactArgs(1, 1, "history requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.loadRegistry()
			if err != nil {
				return err
			}
			e, ok := r.Get(args[0])
			if !ok {
				return unknownWorkflow("workflow not found", r, args[0])
			}
			rows := e.VersionRows()
			if asJSON {
				return writeJSON(a.out(), rows)
			}
			for _, row := range rows {
				line := row.Hash + "\t" + isoMillis(row.Timestamp)
				if row.Current {
					line += "\t(current)"
				}
				fmt.Fprintln(a.out(), line)
			}
			return nil
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

func (a *app) workflowRollbackCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rollback <name> [hash]",
		Short: "Rollback a workflow to a previous version",
		Args:  exactArgs(1, 2, "rollback requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, target := args[0], ""
			if len(args) == 2 {
				h, err := ids.ParseHash(args[1])
				if err != nil {
					return err
				}
				target = h
			}
			l, err := a.layout()
			if err != nil {
				return err
			}
			if _, err := registry.RollbackFile(l.RegistryFile(), name, target, l.HasBundle); err != nil {
				if r, lerr := registry.Load(l.RegistryFile()); errors.Is(err, registry.ErrNotRegistered) && lerr == nil {
					return unknownWorkflow("workflow not registered", r, name)
				}
				return err
			}
			fmt.Fprintf(a.out(), "rolled back workflow %q\n", name)
			return nil
		},
	}
}

// isoMillis formats ms since the epoch like JavaScript's toISOString.
func isoMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
