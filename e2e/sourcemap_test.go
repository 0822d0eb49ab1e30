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

// boomEntry throws in its second role, at line 9 of the file.
const boomEntry = `// A workflow whose second role throws at a known line (9).
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

type Meta = { ok: boolean };

// The throw below must stay on line 9: the test reads the mapped position.
function explode(value: string): never {
  const reason: string = "second role exploded on " + value;
  if (value !== "") throw new Error(reason);
  throw new Error("empty prompt");
}

const definition = {
  description: "Fails in the middle.",
  roles: {
    first: { description: "Works", systemPrompt: "", schema: { type: "object" } },
    second: { description: "Throws", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "first" }],
    first: [{ condition: "FALLBACK", role: "second" }],
    second: [{ condition: "FALLBACK", role: END }],
  },
};

const adapter = (_prompt: string, _schema: unknown) => async (ctx: { steps: unknown[]; start: { content: string } }) => {
  if (ctx.steps.length === 0) return { meta: { ok: true } satisfies Meta, childThread: null };
  explode(ctx.start.content);
};

export const run = createWorkflow(definition as never, { adapter, overrides: null } as never);
export const descriptor = buildDescriptor(definition as never);
`

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
	if err := os.WriteFile(filepath.Join(ws, "workflows", "boom-entry.ts"), []byte(boomEntry), 0o644); err != nil {
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
