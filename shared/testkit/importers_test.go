package testkit

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testOnlyPackages are the module's packages that exist for tests and
// benchmark harnesses: a binary or library users run that imported them
// would link test support (and, for natstest, a whole NATS server) into
// it. The harnesses under bench/ are not run by users; they may.
var testOnlyPackages = []string{
	"github.com/uncaged/workflow/shared/testkit",
	"github.com/uncaged/workflow/gateway/internal/natstest",
	"github.com/uncaged/workflow/shared/testkit/pgtest",
	"github.com/uncaged/workflow/shared/testkit/nginxconf",
	"github.com/uncaged/workflow/engine/workflow/workflowtest",
}

// TestOnlyTestFilesImportTestSupport walks the module's Go files and fails
// on any file other than a _test.go file or a benchmark harness's that
// imports a test-only package.
func TestOnlyTestFilesImportTestSupport(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "node_modules" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		// The test-only packages' own files are their implementation.
		dir := filepath.ToSlash(filepath.Dir(path))
		if strings.HasSuffix(dir, "shared/testkit") || strings.HasSuffix(dir, "shared/testkit/pgtest") ||
			strings.HasSuffix(dir, "shared/testkit/nginxconf") || strings.HasSuffix(dir, "gateway/internal/natstest") ||
			strings.HasSuffix(dir, "engine/workflow/workflowtest") {
			return nil
		}
		if rel, _ := filepath.Rel(root, path); strings.HasPrefix(filepath.ToSlash(rel), "bench/") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, only := range testOnlyPackages {
				if p == only {
					t.Errorf("%s imports %s, which only tests may import", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d non-test Go files; is the test running in shared/testkit?", checked)
	}
}
