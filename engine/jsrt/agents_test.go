package jsrt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/shared/testkit"
)

func metaText(t *testing.T, m canonyaml.Map) string {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAgentAdaptersRunWorkflow(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "agents_exec.esm.js")
	h := newFakeHost(t)
	th := threadFor(b, "ship it")
	th.Depth = 1
	outs, done, err := drive(t, b, h, th)
	if err != nil {
		t.Fatal(err)
	}
	if done.ReturnCode != 0 || len(outs) != 4 {
		t.Fatalf("completion %+v after %d steps", done, len(outs))
	}

	// planner: exec output as meta; casRef strings (deduplicated) are the
	// content node's refs, and RoleOutput.refs adds the content hash.
	planner := outs[0]
	if got := metaText(t, planner.Meta); got != `{"plan":"p","artifact":"SSVQ0RZ55P9Y4","files":[{"hash":"4V3R4ZC8KXPT6"},{"hash":"SSVQ0RZ55P9Y4"}],"note":"not a ref"}` {
		t.Errorf("planner meta = %s", got)
	}
	wantRefs := []string{"SSVQ0RZ55P9Y4", "4V3R4ZC8KXPT6", planner.ContentHash}
	if strings.Join(planner.Refs, ",") != strings.Join(wantRefs, ",") {
		t.Errorf("planner refs = %v, want %v", planner.Refs, wantRefs)
	}
	n, err := h.store.GetNode(planner.ContentHash)
	if err != nil {
		t.Fatal(err)
	}
	c := n.(node.Content)
	if strings.Join(c.Refs, ",") != "SSVQ0RZ55P9Y4,4V3R4ZC8KXPT6" {
		t.Errorf("content node refs = %v", c.Refs)
	}
	var stored map[string]any
	if err := json.Unmarshal([]byte(c.Payload), &stored); err != nil || stored["plan"] != "p" {
		t.Errorf("content payload %q is not the meta as JSON", c.Payload)
	}

	// coder: Zod-like schema — safeParse's data is the meta, the role name
	// reached the agent, casRef from toJSONSchema's output.
	coder := outs[1]
	if got := metaText(t, coder.Meta); got != `{"status":"ok","role":"coder","log":"4V3R4ZC8KXPT6","parsed":true}` {
		t.Errorf("coder meta = %s", got)
	}
	if len(coder.Refs) != 2 || coder.Refs[0] != "4V3R4ZC8KXPT6" {
		t.Errorf("coder refs = %v", coder.Refs)
	}

	// reviewer: the thread context the exec agent got on stdin.
	reviewer := outs[2]
	get := func(k string) any { v, _ := reviewer.Meta.Get(k); return v }
	if get("threadId") != th.ThreadID || get("role") != "reviewer" || get("prompt") != "ship it" || get("depth") != float64(1) || get("systemPrompt") != "You review." {
		t.Errorf("reviewer saw %s", metaText(t, reviewer.Meta))
	}
	steps, _ := get("steps").([]any)
	if len(steps) != 2 {
		t.Fatalf("reviewer saw %d steps", len(steps))
	}
	first := steps[0].(canonyaml.Map)
	if role, _ := first.Get("role"); role != "planner" {
		t.Errorf("steps[0].role = %v", role)
	}
	if ch, _ := first.Get("contentHash"); ch != planner.ContentHash {
		t.Errorf("steps[0].contentHash = %v, want %s", ch, planner.ContentHash)
	}
	if m, _ := first.Get("meta"); metaText(t, m.(canonyaml.Map)) != metaText(t, planner.Meta) {
		t.Errorf("steps[0].meta = %v", m)
	}

	// summarizer: createAgentAdapter — text to a content node, then
	// runtime.extract with the role's schema.
	summarizer := outs[3]
	if got := metaText(t, summarizer.Meta); got != `{"schema":"{\"type\":\"object\"}"}` {
		t.Errorf("summarizer meta = %s", got)
	}
	h.mu.Lock()
	extracted := append([]string(nil), h.extracted...)
	h.mu.Unlock()
	if len(extracted) != 1 || extracted[0] != `{"type":"object"}` {
		t.Errorf("extract schemas = %q", extracted)
	}
	want := node.NewContent("summary of ship it (You summarize.) after 3 steps", nil)
	wantHash, _ := h.store.PutNode(want)
	if ok, _ := h.store.Exists(wantHash); !ok {
		t.Errorf("the agent's text was not stored")
	}

	// The agents' progress is in the thread's log.
	if len(h.logged("agent")) == 0 {
		t.Errorf("no agent lines in the log")
	}
}

func TestAgentZodSafeParseFailure(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "agents_zod_fail.esm.js")
	h := newFakeHost(t)
	_, _, err := drive(t, b, h, threadFor(b, "x"))
	if err == nil || !strings.Contains(err.Error(), `role "checker": the agent's output does not match the role's schema: status: Invalid input: expected "ok"`) {
		t.Fatalf("got %v", err)
	}
}

func TestAgentAdapterSpecErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`execAdapter({ command: "./role.sh" })`:              `must be an absolute path or a program name found on PATH`,
		`cursorAdapter({ workspace: "proj" })`:               `workspace must be an absolute path`,
		`cliAdapter({ comand: "claude" })`:                   `unknown field "comand"`,
		`cliAdapter({})`:                                     `a cli agent needs a command`,
		`execAdapter({ command: "/bin/true", model: "m" })`:  `model does not apply to a exec agent`,
		`execAdapter({ command: "/bin/true", timeout: -5 })`: `timeout must be >= 0`,
		`hermesAdapter({ type: "cursor" })`:                  `hermesAdapter: options.type must be omitted`,
		`agentAdapter({ type: "gpt" })`:                      `unknown type "gpt"`,
		`agentAdapter("cli")`:                                `agentAdapter: spec must be an object`,
		`llmAdapter(5)`:                                      `llmAdapter: options must be an object`,
		`createAgentAdapter("x")`:                            `createAgentAdapter: agent must be a function`,
	}
	for expr, want := range cases {
		src := `import { agentAdapter, llmAdapter, cliAdapter, cursorAdapter, hermesAdapter, execAdapter, createAgentAdapter } from "@uncaged/workflow-runtime";
const adapter = ` + expr + `;
export const run = async function* () { return { returnCode: 0, summary: String(adapter) }; };
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
`
		_, err := Load([]byte(src), "spec.esm.js", Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", expr, err, want)
		}
	}
	// Every adapter factory accepts its options.
	src := `import { agentAdapter, llmAdapter, reactAdapter, cliAdapter, cursorAdapter, hermesAdapter, execAdapter } from "@uncaged/workflow-runtime";
const all = [
  agentAdapter({ type: "workflow", workflow: "develop" }),
  llmAdapter({ model: "default", maxRounds: 3 }),
  reactAdapter({ model: "openai/gpt-4o", workspace: "/tmp", tools: ["read_file"] }),
  cliAdapter({ command: "claude", args: ["-p", "{prompt}"], timeout: 1000, env: { A: "b" } }),
  cursorAdapter({ model: null, workspace: "/tmp", timeout: 0 }),
  hermesAdapter(),
  execAdapter({ command: "/bin/cat", type: "exec" }),
];
export const run = async function* () { return { returnCode: 0, summary: String(all.length) }; };
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
`
	if _, err := Load([]byte(src), "ok.esm.js", Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestCollectCasRefs(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "casrefs.esm.js")
	h := newFakeHost(t)
	outs, _, err := drive(t, b, h, threadFor(b, "x"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"flat":          {"A"},
		"missing":       {},
		"nonString":     {},
		"nested":        {"X", "L1", "L2"},
		"tuple":         {"T1", "T2"},
		"nullable":      {"N"},
		"nullValue":     {},
		"outerMark":     {"O"},
		"discriminated": {"R"},
		"defs":          {"D1", "D2"},
		"record":        {"R1", "R2"},
		"allOf":         {"A", "B"},
		"zodLike":       {"Z"},
		"none":          {},
	}
	meta := outs[0].Meta
	if len(meta) != len(want) {
		t.Errorf("got %d cases, want %d", len(meta), len(want))
	}
	for _, p := range meta {
		items, _ := p.Value.([]any)
		got := make([]string, len(items))
		for i, it := range items {
			got[i], _ = it.(string)
		}
		if strings.Join(got, ",") != strings.Join(want[p.Key], ",") {
			t.Errorf("%s: got %q, want %q", p.Key, got, want[p.Key])
		}
	}
}

func TestAgentCasRefMustBeHash(t *testing.T) {
	t.Parallel()
	src := `import { createWorkflow, execAdapter, START, END } from "@uncaged/workflow-runtime";
const definition = {
  description: "d",
  roles: { r: { description: "r", systemPrompt: "", schema: { type: "object", properties: { out: { type: "string", casRef: true } } } } },
  table: { [START]: [{ condition: "FALLBACK", role: "r" }], r: [{ condition: "FALLBACK", role: END }] },
};
export const run = createWorkflow(definition, { adapter: execAdapter({ command: "sh", args: ["-c", "echo '{\"out\":\"not-a-hash\"}'"] }), overrides: null });
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
`
	b, err := Load([]byte(src), "badref.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = drive(t, b, newFakeHost(t), threadFor(b, "x"))
	if err == nil || !strings.Contains(err.Error(), `role "r": a meta field marked casRef is not a CAS hash`) || !strings.Contains(err.Error(), "not-a-hash") {
		t.Fatalf("got %v", err)
	}
}

func TestAgentFailureRejects(t *testing.T) {
	t.Parallel()
	src := `import { createWorkflow, execAdapter, START, END } from "@uncaged/workflow-runtime";
const definition = {
  description: "d",
  roles: { r: { description: "r", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "r" }], r: [{ condition: "FALLBACK", role: END }] },
};
const failing = execAdapter({ command: "sh", args: ["-c", "echo oops >&2; exit 4"] });
// The role catches the agent's error and reports it as meta.
const adapter = (p, s) => {
  const fn = failing(p, s);
  return async (ctx, runtime, info) => {
    try {
      await fn(ctx, runtime, info);
      return { meta: { caught: null }, childThread: null };
    } catch (e) {
      return { meta: { caught: e.message }, childThread: null };
    }
  };
};
export const run = createWorkflow(definition, { adapter, overrides: null });
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
`
	b, err := Load([]byte(src), "failing.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	outs, _, err := drive(t, b, newFakeHost(t), threadFor(b, "x"))
	if err != nil {
		t.Fatal(err)
	}
	caught, _ := outs[0].Meta.Get("caught")
	if s, _ := caught.(string); !strings.Contains(s, "exit code 4 (non_zero_exit)") || !strings.Contains(s, "stderr: oops") {
		t.Errorf("caught %v", caught)
	}
}

func TestKillCancelsAgentProcess(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "agents_kill.esm.js")
	h := newFakeHost(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	h.env["PIDFILE"] = pidFile
	r, cancel, errc := startKillable(t, b, h, threadFor(b, "x"))
	var pid int
	testkit.WaitUntil(t, "the agent to start", func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after kill: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the agent's goroutine, which reaps the process.
	if !testkit.ProcessGone(pid) {
		t.Errorf("agent process %d survived the kill", pid)
	}
}

func TestAgentRejectsBadThreadContext(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{}`:                           "threadId is required",
		`{ threadId: "t", start: {} }`: "start.content is required",
		`{ threadId: "t", depth: 1.5, start: { content: "x" } }`:                      "depth must be a non-negative integer",
		`{ threadId: "t", start: { content: "x" }, steps: [5] }`:                      "steps[0] must be an object",
		`{ threadId: "t", start: { content: "x" }, steps: [{ role: 1 }] }`:            "steps[0].role has the wrong type",
		`{ threadId: "t", start: { content: "x" }, steps: [{ role: "r", meta: 1 }] }`: "steps[0].meta has the wrong type",
		`"text"`: "expected an object",
	}
	for ctx, want := range cases {
		src := `import { execAdapter } from "@uncaged/workflow-runtime";
const roleFn = execAdapter({ command: "/bin/cat" })("prompt", { type: "object" });
export const run = async function* (thread, runtime) {
  try {
    await roleFn(` + ctx + `, runtime, { role: "r" });
    return { returnCode: 1, summary: "accepted" };
  } catch (e) {
    return { returnCode: 0, summary: e.message };
  }
};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
`
		b, err := Load([]byte(src), "ctx.esm.js", Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := drive(t, b, newFakeHost(t), threadFor(b, "x"))
		if err != nil {
			t.Fatal(err)
		}
		if done.ReturnCode != 0 || !strings.Contains(done.Summary, want) {
			t.Errorf("%s: got %+v, want an error containing %q", ctx, done, want)
		}
	}
}
