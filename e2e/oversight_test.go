package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withoutOversight turns the supervisor and the summarizer off in root's
// workflow.yaml (supervisorInterval: 0, summarizer: off), for a test that
// counts a fake model's calls made by its roles alone: with the config
// `setup` writes, both run with models.default, as the original's do.
func withoutOversight(t *testing.T, root string) {
	t.Helper()
	path := filepath.Join(root, "workflow.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const interval = `"supervisorInterval": 3`
	if !strings.Contains(string(b), interval) {
		t.Fatalf("no %s in %s:\n%s", interval, path, b)
	}
	off := strings.Replace(string(b), interval, `"supervisorInterval": 0`+"\n  "+`"summarizer": "off"`, 1)
	if err := os.WriteFile(path, []byte(off), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, root, "doctor"); strings.Contains(r.stdout+r.stderr, "summarizer") {
		t.Fatalf("doctor on the changed workflow.yaml: %+v", r)
	}
}
