package cli

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// scaffoldFS holds the files `init` writes. "all:" keeps templates/.gitkeep,
// which embed would otherwise skip.
//
//go:embed all:scaffold
var scaffoldFS embed.FS

// templatesGlob is the workspaces entry that marks a workflow workspace.
const templatesGlob = "templates/*"

// templateNamePattern keeps template names usable as npm package suffixes
// and as TypeScript identifiers (after camel-casing).
var templateNamePattern = lazyRegexp(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

func (a *app) initCmd() *cobra.Command {
	return group("init", "Development:", "Scaffold workspaces and templates",
		a.initWorkspaceCmd(),
		a.initTemplateCmd(),
	)
}

func (a *app) initWorkspaceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workspace <name>",
		Short: "Initialize a new workflow workspace",
		Long: `Creates <name>/ (a path relative to the current directory) with package.json,
tsconfig.json, README.md, AGENTS.md, types/, templates/ and a runnable example
entry workflows/hello-entry.ts. Build it with uncaged-workflow build.`,
		Args: exactArgs(1, 1, "init workspace requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			root, err := initWorkspace(cwd, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "initialized workflow workspace at %s\n", root)
			return nil
		},
	}
}

func (a *app) initTemplateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "template <name>",
		Short: "Initialize a new workflow template",
		Long: `Creates templates/<name>/ in the workspace that contains the current directory,
and a workflow entry workflows/<name>-entry.ts that binds it (unless one exists).`,
		Args: exactArgs(1, 1, "init template requires <name>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			created, err := initTemplate(cwd, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "initialized template at %s\n", created.templateDir)
			if created.entry != "" {
				fmt.Fprintf(a.out(), "created workflow entry at %s\n", created.entry)
			}
			return nil
		},
	}
}

// initWorkspace scaffolds a workspace at name resolved against cwd and
// returns its absolute path. Nothing is written when the target exists.
func initWorkspace(cwd, name string) (string, error) {
	base := filepath.Base(filepath.Clean(name))
	if strings.TrimSpace(name) == "" || base == "." || base == ".." || base == string(filepath.Separator) {
		return "", fmt.Errorf("invalid workspace path: %s", name)
	}
	root := name
	if !filepath.IsAbs(root) {
		root = filepath.Join(cwd, name)
	}
	root = filepath.Clean(root)
	if _, err := os.Lstat(root); err == nil {
		return "", fmt.Errorf("directory already exists: %s", root)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := createDir(root); err != nil {
		return "", err
	}
	pkgName := npmName(base)
	err := writeScaffold("scaffold/workspace", root, func(text string) string {
		return strings.ReplaceAll(text, "__NAME__", pkgName)
	}, map[string]string{"gitignore": ".gitignore"})
	if err != nil {
		_ = os.RemoveAll(root) // best effort, ours (createDir made it): leave no half workspace
		return "", err
	}
	return root, nil
}

// templateCreated is what initTemplate wrote.
type templateCreated struct {
	templateDir string
	// entry is the workflow entry written for the template, or "" when one
	// existed already.
	entry string
}

// initTemplate scaffolds templates/<name>/ in the workspace enclosing cwd,
// plus workflows/<name>-entry.ts when that file does not exist yet.
func initTemplate(cwd, name string) (templateCreated, error) {
	if !templateNamePattern().MatchString(name) {
		return templateCreated{}, fmt.Errorf("invalid template name: %q (use lowercase kebab-case: letters, digits and single hyphens, e.g. \"review-loop\")", name)
	}
	root, err := findWorkspaceRoot(cwd)
	if err != nil {
		return templateCreated{}, err
	}
	dir := filepath.Join(root, "templates", name)
	if _, err := os.Lstat(dir); err == nil {
		return templateCreated{}, fmt.Errorf("template already exists: %s", dir)
	}
	ident := camelCase(name)
	replace := strings.NewReplacer(
		"__NAME__", name,
		"__IDENT__", ident,
		"__TYPE__", strings.ToUpper(ident[:1])+ident[1:],
	).Replace
	entrySrc, err := fs.ReadFile(scaffoldFS, "scaffold/template/entry.ts")
	if err != nil {
		return templateCreated{}, err
	}
	if err := createDir(dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return templateCreated{}, fmt.Errorf("template already exists: %s", dir)
		}
		return templateCreated{}, err
	}
	// entry.ts is written beside the workflows, not into the template.
	if err := writeScaffold("scaffold/template", dir, replace, map[string]string{"entry.ts": ""}); err != nil {
		_ = os.RemoveAll(dir) // best effort, ours (createDir made it)
		return templateCreated{}, err
	}
	created := templateCreated{templateDir: dir}
	entry := filepath.Join(root, "workflows", name+"-entry.ts")
	if _, err := os.Lstat(entry); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
			return created, err
		}
		if err := os.WriteFile(entry, []byte(replace(string(entrySrc))), 0o644); err != nil {
			return created, err
		}
		created.entry = entry
	}
	return created, nil
}

// createDir creates dir, and its parents, failing when dir itself exists:
// two inits racing for one path cannot both fill it.
func createDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return dirExistsError{dir}
		}
		return err
	}
	return nil
}

// dirExistsError is the original's "directory already exists" message; it
// matches fs.ErrExist.
type dirExistsError struct{ dir string }

func (e dirExistsError) Error() string        { return "directory already exists: " + e.dir }
func (e dirExistsError) Is(target error) bool { return target == fs.ErrExist }

// writeScaffold copies the embedded tree src into the directory dst,
// passing every file through replace. rename maps a file's base name to the
// name it is written under; "" skips the file.
func writeScaffold(src, dst string, replace func(string) string, rename map[string]string) error {
	return fs.WalkDir(scaffoldFS, src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel := strings.TrimPrefix(p, src+"/")
		if to, ok := rename[path.Base(rel)]; ok {
			if to == "" {
				return nil
			}
			rel = path.Join(path.Dir(rel), to)
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := fs.ReadFile(scaffoldFS, p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, []byte(replace(string(b))), 0o644)
	})
}

// findWorkspaceRoot walks up from dir to the first package.json whose
// workspaces include "templates/*".
func findWorkspaceRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if isWorkspaceRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(`not inside a workflow workspace (no package.json with workspaces containing "templates/*")`)
		}
		dir = parent
	}
}

func isWorkspaceRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return false
	}
	var pkg struct {
		Workspaces json.RawMessage `json:"workspaces"`
	}
	if json.Unmarshal(b, &pkg) != nil || len(pkg.Workspaces) == 0 {
		return false
	}
	// npm allows a list or {packages: [...]}.
	var list []string
	if json.Unmarshal(pkg.Workspaces, &list) != nil {
		var obj struct {
			Packages []string `json:"packages"`
		}
		if json.Unmarshal(pkg.Workspaces, &obj) != nil {
			return false
		}
		list = obj.Packages
	}
	return slices.Contains(list, templatesGlob)
}

// camelCase turns a kebab-case name into a lowerCamelCase identifier.
func camelCase(name string) string {
	parts := strings.Split(name, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// npmName makes a directory name acceptable as a package.json name: lower
// case, no spaces or characters npm rejects.
func npmName(base string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	s := strings.TrimLeft(b.String(), "._")
	if s == "" {
		return "workflow-workspace"
	}
	return s
}
