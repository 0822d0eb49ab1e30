package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// compatibilityFile is the compatibility table, relative to this package.
const compatibilityFile = "compatibility.md"

// testFuncs lists the Test functions of every _test.go file in the module.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompatibilityTable keeps the "At a glance" tables of
// compatibility.md honest: every row has four cells, a status of
// supported, fixed or differs, and names at least one test, and every test
// it names exists. (The generated export table between its markers is
// checked by TestOriginalExports in engine/jsrt.)
func TestCompatibilityTable(t *testing.T) {
	b, err := os.ReadFile(compatibilityFile)
	if err != nil {
		t.Fatal(err)
	}
	_, glance, ok := strings.Cut(string(b), "\n## At a glance\n")
	if !ok {
		t.Fatal(`compatibility.md has no "## At a glance" section`)
	}
	if i := strings.Index(glance, "\n## "); i >= 0 {
		glance = glance[:i]
	}
	tests := testFuncs(t)
	testName := regexp.MustCompile("`(Test[A-Za-z0-9_]*)`")
	rows, generated := 0, false
	for _, line := range strings.Split(glance, "\n") {
		switch {
		case strings.HasPrefix(line, "<!-- original-exports:begin"):
			generated = true
		case strings.HasPrefix(line, "<!-- original-exports:end"):
			generated = false
		}
		if generated || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| what |") || strings.HasPrefix(line, "| package | status |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 4 {
			t.Errorf("row with %d cells, want 4 (what | status | why | held by): %s", len(cells), line)
			continue
		}
		rows++
		switch status := strings.TrimSpace(cells[1]); status {
		case "supported", "fixed", "differs":
		default:
			t.Errorf("status %q is none of supported, fixed, differs: %s", status, line)
		}
		names := testName.FindAllStringSubmatch(cells[3], -1)
		if len(names) == 0 {
			t.Errorf("row names no test: %s", line)
		}
		for _, n := range names {
			if !tests[n[1]] {
				t.Errorf("row names %s, which no _test.go file declares: %s", n[1], line)
			}
		}
	}
	if rows < 20 {
		t.Errorf("found only %d rows; did the tables' format change?", rows)
	}
}
