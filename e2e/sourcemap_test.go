package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// boomEntry throws in its second role, at line 9 of the file; the
// engine's own source-map tests build it too.
const boomEntry = "../engine/jsrt/testdata/sourcemap/workflows/boom-entry.ts"

// TestBuiltBundleErrorsPointAtTheSource: a bundle made by build carries a
// source map, so a role's error names the TypeScript file's line — in the
// thread's summary, in live and in the API the dashboard reads — not the
// bundle's.
func TestBuiltBundleErrorsPointAtTheSource(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	parent := t.TempDir()
	mustRunIn(t, parent, root, "init", "workspace", "ws")
	ws := filepath.Join(parent, "ws")
	src, err := os.ReadFile(boomEntry)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "workflows", "boom-entry.ts"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runEnv(t, []string{"PATH=" + t.TempDir()}, ws, root, "build", "workflows/boom-entry.ts")
	if r.code != 0 || r.stderr != "build: types are not checked (esbuild strips them); build --check runs tsc first\n" {
		t.Fatalf("build: %+v", r)
	}
	mustRunIn(t, ws, root, "workflow", "add", "boom", "dist/boom-entry.esm.js")
	id := start(t, root, "boom", "--prompt", "purpose")

	at := regexp.MustCompile(`\(workflows/boom-entry\.ts:9:\d+\)`)
	s := finished(t, root, id)
	if s.Status != "failed" || !strings.Contains(s.Result.Summary, "Error: second role exploded on purpose") || !at.MatchString(s.Result.Summary) || strings.Contains(s.Result.Summary, ".esm.js") {
		t.Fatalf("thread: status %s, summary %q", s.Status, s.Result.Summary)
	}
	if live := run(t, root, "live", id); !at.MatchString(live.stdout) {
		t.Fatalf("live: %+v", live)
	}

	// The dashboard shows what the connector's API answers.
	p := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root}, "uncaged-workflow", "serve", "--listen", "127.0.0.1:0")
	base := p.serving(t)
	resp, err := http.Get(base + "/api/threads/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/threads/%s: %d %v", id, resp.StatusCode, err)
	}
	if raw, _ := json.Marshal(body); !at.Match(raw) || strings.Contains(string(raw), ".esm.js:") {
		t.Fatalf("API thread: %s", raw)
	}
}
