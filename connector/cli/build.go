package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/evanw/esbuild/pkg/api"
	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/jsrt"
)

// entrySuffix marks the files `build` bundles by default.
const entrySuffix = "-entry.ts"

func (a *app) buildCmd() *cobra.Command {
	var outdir string
	var check bool
	cmd := &cobra.Command{
		Use:   "build [dir | entry.ts ...]",
		Short: "Bundle TypeScript workflow entries into .esm.js bundles",
		Long: `With no argument or a directory, bundles every workflows/*-entry.ts of that
workspace (default: the current directory) into dist/<stem>.esm.js, with a
dist/<stem>.d.ts beside it. With files, bundles those entries into the dist/
of their workspace. The @uncaged/* packages the engine provides
(@uncaged/workflow-runtime and the original's agent and utility packages) and
Node built-ins stay imports; everything else is bundled. Each bundle is then
checked the way "workflow add" checks it.

Each bundle carries an inline source map, so a role's error names the line
of the .ts file ("workflows/x-entry.ts:9:25"), not of the bundle.

esbuild strips types without checking them. --check first runs
"tsc --noEmit" (with the workspace's tsconfig.json when it has one), from
node_modules/.bin or PATH, and builds nothing when it fails; without tsc,
--check fails (npm install --save-dev typescript).`,
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{groupAnnotation: "Development:"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("outdir") && outdir == "" {
				return errors.New("missing value for --outdir")
			}
			plan, err := planBuild(args, outdir)
			if err != nil {
				return err
			}
			plan.check = check
			return a.runBuild(cmd.Context(), plan)
		},
	}
	cmd.Flags().StringVar(&outdir, "outdir", "", "directory for the bundles (default: <workspace>/dist)")
	cmd.Flags().BoolVar(&check, "check", false, "type-check with tsc --noEmit before bundling (needs typescript installed)")
	return cmd
}

// buildPlan is what one build invocation bundles and where it writes.
type buildPlan struct {
	// dir is the workspace (or working) directory paths are shown relative to.
	dir     string
	outdir  string
	entries []string // absolute paths
	check   bool     // type-check with tsc first
}

// planBuild resolves the arguments into a plan, checking every entry
// exists before anything is built.
func planBuild(args []string, outdir string) (buildPlan, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return buildPlan{}, err
	}
	var plan buildPlan
	if len(args) == 0 || (len(args) == 1 && isDir(args[0])) {
		dir := cwd
		if len(args) == 1 {
			dir = absFrom(cwd, args[0])
		}
		workflows := filepath.Join(dir, "workflows")
		if !isDir(workflows) {
			return buildPlan{}, fmt.Errorf("no workflows/ directory in %s (create a workspace with: uncaged-workflow init workspace <name>)", dir)
		}
		matches, err := filepath.Glob(filepath.Join(workflows, "*"+entrySuffix))
		if err != nil {
			return buildPlan{}, err
		}
		sort.Strings(matches)
		plan = buildPlan{dir: dir, entries: matches}
	} else {
		for _, arg := range args {
			p := absFrom(cwd, arg)
			st, err := os.Stat(p)
			switch {
			case err != nil:
				return buildPlan{}, fmt.Errorf("entry not found: %s", arg)
			case st.IsDir():
				return buildPlan{}, fmt.Errorf("build takes one directory or entry files, not both: %s is a directory", arg)
			case !isScriptFile(p):
				return buildPlan{}, fmt.Errorf("entry must be a .ts or .js file: %s", arg)
			}
			plan.entries = append(plan.entries, p)
		}
		plan.dir = cwd
		if root, err := findWorkspaceRoot(filepath.Dir(plan.entries[0])); err == nil {
			plan.dir = root
		}
	}
	plan.outdir = filepath.Join(plan.dir, "dist")
	if outdir != "" {
		plan.outdir = absFrom(cwd, outdir)
	}
	seen := map[string]string{}
	for _, e := range plan.entries {
		stem := entryStem(e)
		if prev, dup := seen[stem]; dup {
			return buildPlan{}, fmt.Errorf("two entries would both write %s.esm.js: %s and %s", stem, prev, e)
		}
		seen[stem] = e
	}
	return plan, nil
}

func (a *app) runBuild(ctx context.Context, plan buildPlan) error {
	if len(plan.entries) == 0 {
		fmt.Fprintf(a.env.Stderr, "build: no workflows/*%s files in %s; nothing to build\n", entrySuffix, plan.dir)
		return nil
	}
	if plan.check {
		if err := a.typeCheck(ctx, plan); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.env.Stderr, "build: types are not checked (esbuild strips them); build --check runs tsc first")
	}
	failed := 0
	for _, entry := range plan.entries {
		if err := a.buildEntry(plan, entry); err != nil {
			fmt.Fprintln(a.env.Stderr, err.Error())
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(a.env.Stderr, "build failed: %d of %d entries\n", failed, len(plan.entries))
		return exitError{1}
	}
	return nil
}

// buildEntry bundles one entry, checks the result loads like a registered
// bundle, and only then writes it.
func (a *app) buildEntry(plan buildPlan, entry string) error {
	stem := entryStem(entry)
	started := time.Now()
	bundle, warnings, err := bundleEntry(entry, plan.dir)
	for _, w := range warnings {
		fmt.Fprintln(a.env.Stderr, w)
	}
	if err != nil {
		return fmt.Errorf("build: %s failed:\n%w", stem, err)
	}
	if _, err := jsrt.Load(bundle, stem+".esm.js", jsrt.Options{}); err != nil {
		return fmt.Errorf("build: %s: the bundle would be rejected by workflow add: %w", stem, err)
	}
	if err := os.MkdirAll(plan.outdir, 0o755); err != nil {
		return err
	}
	out := filepath.Join(plan.outdir, stem+".esm.js")
	if err := atomicfile.Write(out, bundle, 0o644); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(plan.outdir, stem+".d.ts"), []byte(typesSidecar(plan.outdir, entry)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(a.out(), "build: %s -> %s (%s, %d ms)\n", stem, displayPath(plan.dir, out), formatSize(len(bundle)), time.Since(started).Milliseconds())
	return nil
}

// bundleEntry runs esbuild: one self-contained ESM file in which only the
// modules the engine provides stay imports.
func bundleEntry(entry, workDir string) (bundle []byte, warnings []string, err error) {
	result := api.Build(api.BuildOptions{
		EntryPoints:   []string{entry},
		AbsWorkingDir: workDir,
		Bundle:        true,
		Write:         false,
		Outfile:       entryStem(entry) + ".esm.js",
		Format:        api.FormatESModule,
		Platform:      api.PlatformNode, // keeps node:* and bare built-ins external
		Target:        api.ES2020,
		Splitting:     false,
		External:      jsrt.ProvidedPackages(),
		Charset:       api.CharsetUTF8,
		LogLevel:      api.LogLevelSilent,
		// An inline map keeps the bundle one file (it is registered and
		// stored alone) and lets the engine report errors at the source's
		// lines. Its sources are relative to the workspace, as the outfile
		// is, so the bytes — and the hash — do not depend on where the
		// workspace lives or on --outdir; the sources' text is left out.
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
	})
	for _, w := range result.Warnings {
		warnings = append(warnings, formatMessages([]api.Message{w}, workDir, "warning"))
	}
	if len(result.Errors) > 0 {
		return nil, warnings, errors.New(formatMessages(result.Errors, workDir, "error"))
	}
	for _, f := range result.OutputFiles {
		if strings.HasSuffix(f.Path, ".esm.js") {
			return f.Contents, warnings, nil
		}
	}
	return nil, warnings, errors.New("esbuild produced no output")
}

// formatMessages renders esbuild's messages as file:line:col: kind: text,
// the location relative to the workspace.
func formatMessages(msgs []api.Message, dir, kind string) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n")
		}
		if m.Location != nil {
			fmt.Fprintf(&b, "%s:%d:%d: %s: %s", displayPath(dir, absFrom(dir, m.Location.File)), m.Location.Line, m.Location.Column+1, kind, m.Text)
			if m.Location.LineText != "" {
				fmt.Fprintf(&b, "\n    %s", m.Location.LineText)
			}
		} else {
			fmt.Fprintf(&b, "%s: %s", kind, m.Text)
		}
		for _, n := range m.Notes {
			// esbuild suggests marking the module external, which would
			// only move the failure to registration.
			if !strings.Contains(n.Text, "as external") {
				fmt.Fprintf(&b, "\n  note: %s", n.Text)
			}
		}
		if strings.HasPrefix(m.Text, "Could not resolve") {
			b.WriteString("\n  note: install the package (e.g. npm install <package>) so build can bundle it; only the @uncaged/* packages the engine provides and Node built-ins stay imports")
		}
	}
	return b.String()
}

// typesSidecar is dist/<stem>.d.ts: it re-exports the entry's types, as the
// original's bundle script wrote it.
func typesSidecar(outdir, entry string) string {
	rel, err := filepath.Rel(outdir, strings.TrimSuffix(entry, filepath.Ext(entry)))
	if err != nil {
		rel = strings.TrimSuffix(entry, filepath.Ext(entry))
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, ".") {
		rel = "./" + rel
	}
	return fmt.Sprintf("export { run, descriptor } from %q;\n", rel+".js")
}

// entryStem is an entry's file name without its extension.
func entryStem(entry string) string {
	base := filepath.Base(entry)
	for _, ext := range []string{".ts", ".mts", ".js", ".mjs"} {
		if s, ok := strings.CutSuffix(base, ext); ok {
			return s
		}
	}
	return base
}

func isScriptFile(p string) bool {
	if strings.HasSuffix(p, ".d.ts") {
		return false
	}
	switch filepath.Ext(p) {
	case ".ts", ".mts", ".js", ".mjs":
		return true
	}
	return false
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func absFrom(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// displayPath shows p relative to dir when it lies inside it.
func displayPath(dir, p string) string {
	rel, err := filepath.Rel(dir, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return p
	}
	return rel
}

// formatSize prints a byte count the way people read it.
func formatSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
	}
}
