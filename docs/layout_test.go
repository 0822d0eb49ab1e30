package docs

import (
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layoutFile holds the repository layout, relative to this package's
// directory.
const layoutFile = "architecture.md"

// TestLayoutListsEveryPackage keeps architecture.md's "Repository layout"
// block true. The rule: every directory of the module that holds a Go package
// appears in the block as `name/` (its last path element followed by a
// slash), inside the entry of its top-level directory — the line that
// starts with `top/` and the indented lines under it. A top-level package
// is its own entry. Adding a package without a line there fails here, and
// the failure prints the package's doc synopsis to start the line from.
func TestLayoutListsEveryPackage(t *testing.T) {
	entries := layoutEntries(t)
	pkgs := packageDirs(t)
	if len(pkgs) < 10 {
		t.Fatalf("found only %d package directories; is the test running in docs/?", len(pkgs))
	}
	for _, dir := range pkgs {
		parts := strings.Split(dir, "/")
		entry, ok := entries[parts[0]]
		if !ok {
			t.Errorf(layoutFile+"'s layout has no entry %q for package %s (%s)", parts[0]+"/", dir, synopsis(t, dir))
			continue
		}
		if len(parts) == 1 {
			continue
		}
		name := parts[len(parts)-1]
		if !regexp.MustCompile(`(^|[^A-Za-z0-9_.-])` + regexp.QuoteMeta(name) + `/`).MatchString(entry) {
			t.Errorf(layoutFile+"'s layout entry %q does not list package %s as %q; its doc says: %s",
				parts[0]+"/", dir, name+"/", synopsis(t, dir))
		}
	}
}

// layoutEntries reads the fenced block under "## Repository layout" and
// returns each top-level entry's text by its directory name.
func layoutEntries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(layoutFile)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Repository layout\n")
	if !ok {
		t.Fatal(layoutFile + " has no \"## Repository layout\" section")
	}
	_, after, ok = strings.Cut(after, "```\n")
	if !ok {
		t.Fatal(layoutFile + "'s layout section has no fenced block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal(layoutFile + "'s layout block is not closed")
	}
	entries := map[string]string{}
	var top string
	for _, line := range strings.Split(block, "\n") {
		if line == "" {
			continue
		}
		if line[0] != ' ' {
			name, _, _ := strings.Cut(line, "/")
			top = name
			entries[top] = ""
		}
		if top == "" {
			t.Fatalf("%s's layout block starts with an indented line: %q", layoutFile, line)
		}
		entries[top] += line + "\n"
	}
	return entries
}

// packageDirs lists, relative to the module root, every directory holding
// a non-test Go file (testdata, node_modules and hidden directories
// excluded, as the go command does).
func packageDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel != "." {
				seen[filepath.ToSlash(rel)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

// synopsis is the first sentence of a package directory's doc comment.
func synopsis(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(filepath.Join("..", dir))
	if err != nil {
		return "(unparsable: " + err.Error() + ")"
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "(unparsable: " + err.Error() + ")"
		}
		if f.Doc != nil {
			return new(doc.Package).Synopsis(f.Doc.Text())
		}
	}
	return "(no package doc comment)"
}
