package jsrt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/workflow"
)

// storeThread writes a two-step finished thread (planner, coder, __end__)
// into h's CAS, the way the engine stores one, and returns its head.
func storeThread(t *testing.T, h *fakeHost) string {
	t.Helper()
	put := func(n node.Node) string {
		hash, err := h.store.PutNode(n)
		if err != nil {
			t.Fatal(err)
		}
		return hash
	}
	prompt := put(node.NewContent("the stored task", nil))
	start := put(node.NewStart(node.StartPayload{Name: "x", Hash: "4V3R4ZC8KXPT6", Depth: 1}, prompt))
	artifact := put(node.NewContent("an artifact", nil))
	var ancestors []string
	head := ""
	for i, role := range []string{"planner", "coder", node.RoleEnd} {
		content := put(node.NewContent(`{"n":1}`, []string{artifact}))
		p := node.StatePayload{Role: role, Meta: canonyaml.Map{{Key: "n", Value: int64(i)}}, Start: start, Content: content,
			Ancestors: node.Ancestors(head, ancestors), Timestamp: int64(1000 + i)}
		if head != "" {
			ancestors = p.Ancestors
		}
		head = put(node.NewState(p))
	}
	return head
}

// TestCompatPackages runs a bundle that imports the original's packages
// and checks what each returns. Before the packages existed the bundle
// was refused at load (disallowed import specifier).
func TestCompatPackages(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	head := storeThread(t, h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.URL.Path == "/ok/chat/completions" && r.Header.Get("Authorization") == "Bearer k1":
			fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}]}`, body)
		default:
			http.Error(w, "no", http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	h.env["COMPAT_CHAT_URL"] = srv.URL
	h.child = func(_ context.Context, name, prompt string) (workflow.ChildResult, error) {
		return workflow.ChildResult{ReturnCode: 0, Summary: name + " ran " + prompt, RootHash: "4V3R4ZC8KXPT6", ThreadID: "T"}, nil
	}
	b := loadTestdata(t, "compat_modules.esm.js")
	outs, done, err := drive(t, b, h, threadFor(b, "head:"+head))
	if err != nil || done == nil || done.ReturnCode != 0 || len(outs) != 1 {
		t.Fatalf("run: %v %+v (%d outputs)", err, done, len(outs))
	}
	j, err := outs[0].Meta.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(j, &got); err != nil {
		t.Fatal(err)
	}
	wantFields(t, got, map[string]any{
		"chat":               map[string]any{"ok": true, "value": `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`},
		"chatFailed":         map[string]any{"ok": false, "error": map[string]any{"kind": "http_error", "status": 418, "body": "no\n"}},
		"llmFn":              map[string]any{"ok": true, "value": `{"choices":[{"message":{"content":"{\"model\":\"m1\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[],\"tool_choice\":\"auto\"}"}}]}`},
		"child":              map[string]any{"meta": map[string]any{"returnCode": 0, "summary": "leaf ran head:" + head, "rootHash": "4V3R4ZC8KXPT6", "threadId": "T"}, "childThread": "4V3R4ZC8KXPT6"},
		"cursorNoCommand":    map[string]any{"ok": true},
		"sameConstants":      true,
		"okValue":            map[string]any{"ok": true, "value": 1},
		"errValue":           map[string]any{"ok": false, "error": "no"},
		"contentHash":        "SSVQ0RZ55P9Y4", // `cas put hello` in the original
		"contentBack":        "hello",
		"crockfordRoundTrip": "4V3R4ZC8KXPT6",
		"badCrockford":       false,
		"ulidLength":         26,
		"ulidFirst":          "0",
		"badLogTag":          "log tag must be exactly 8 characters",
		"refs":               []string{"A", "B", "C"},
		"casDir":             "/root/cas",
		"unsetAtTopLevel":    nil,
		"fallbackAtTopLevel": "fallback",
		"requireMessage":     "set it",
		"echo":               map[string]any{"ok": false, "error": map[string]any{"kind": "non_zero_exit", "exitCode": 3, "stdout": "out\n", "stderr": "err\n"}},
		"echoed":             map[string]any{"ok": true, "value": "hi\n"},
		"missingKind":        "spawn_failed",
		"cursorRelative":     map[string]any{"ok": false, "error": "command must be an absolute path to the cursor-agent CLI binary"},
		"cursorWorkspace":    map[string]any{"ok": false, "error": "workspace must be an absolute filesystem path when set"},
		"cursorGood":         map[string]any{"ok": true},
		"hermesTimeout":      map[string]any{"ok": false, "error": "timeout must be null or a non-negative number (milliseconds)"},
		"toolNames":          []string{"read_file", "write_file", "patch_file", "shell_exec"},
		"unknownTool":        "Unknown tool: nope",
	})
	for key, want := range map[string]string{
		"threadInput": "## Task\nhead:",
		"agentPrompt": "SYSTEM\n\n## Task\nhead:",
		"reactor":     "createThreadReactor: config must be",
		"badRounds":   "config.maxRounds must be a positive integer, got 0",
		"exhausted":   "max_react_rounds_exceeded",
	} {
		if s, _ := got[key].(string); !strings.Contains(s, want) {
			t.Errorf("%s = %q, want it to contain %q", key, got[key], want)
		}
	}

	// The bundle's own ReAct loop: its tool answered, prose sent back to be
	// corrected, a refused result sent back with the schema's complaint.
	scripted, _ := got["scripted"].(map[string]any)
	if r, _ := json.Marshal(scripted["result"]); string(r) != `{"childThread":null,"meta":{"answer":"42","checked":true}}` {
		t.Errorf("scripted react result = %s", r)
	}
	seen, _ := scripted["seen"].([]any)
	var lasts []string
	for _, s := range seen {
		m := s.(map[string]any)
		last := m["last"].(map[string]any)
		lasts = append(lasts, fmt.Sprint(last["role"], ": ", last["content"]))
		if tools, _ := json.Marshal(m["tools"]); string(tools) != `["lookup","resolve"]` || m["system"] != "You are the scripted one." {
			t.Errorf("round sent tools %s and system %q", tools, m["system"])
		}
	}
	wantLasts := []string{
		"user: ## Task\nhead:" + head,
		`tool: lookup says {"q":1}`,
		"user: Your answer was not accepted (it is not JSON). Call the resolve tool with your result, or reply with only a JSON object matching its schema.",
		"tool: Error: answer: expected string. Call resolve again with arguments matching its schema.",
	}
	if len(lasts) != len(wantLasts) {
		t.Fatalf("rounds' last messages = %q", lasts)
	}
	for i, w := range wantLasts {
		if !strings.HasPrefix(lasts[i], w) {
			t.Errorf("round %d's last message = %q, want %q", i+1, lasts[i], w)
		}
	}

	rebuilt, _ := got["rebuilt"].(map[string]any)
	start, _ := rebuilt["start"].(map[string]any)
	if rebuilt["threadId"] != "" || rebuilt["depth"] != 1.0 || rebuilt["bundleHash"] != "4V3R4ZC8KXPT6" ||
		start["content"] != "the stored task" || start["role"] != "__start__" || start["parentState"] != nil || start["timestamp"] != 1000.0 {
		t.Errorf("buildThreadContext = %v", rebuilt)
	}
	steps, _ := rebuilt["steps"].([]any)
	var stepRoles []string
	for _, s := range steps {
		m := s.(map[string]any)
		stepRoles = append(stepRoles, m["role"].(string))
		if refs, _ := m["refs"].([]any); len(refs) != 1 {
			t.Errorf("step %v: refs of its content node missing", m)
		}
	}
	if !reflect.DeepEqual(stepRoles, []string{"planner", "coder"}) {
		t.Errorf("rebuilt steps = %v, want planner, coder (no __end__)", stepRoles)
	}
}

// TestBuildThreadContextErrors: heads that are not thread nodes are
// refused with the original's messages.
func TestBuildThreadContextErrors(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	b := loadTestdata(t, "compat_modules.esm.js")
	prompt, err := h.store.PutNode(node.NewContent("just text", nil))
	if err != nil {
		t.Fatal(err)
	}
	for head, want := range map[string]string{
		"0000000000000": "buildThreadContext: missing or invalid CAS blob 0000000000000",
		prompt:          "buildThreadContext: head " + prompt + " must be start or state node",
	} {
		_, _, err := drive(t, b, h, threadFor(b, "head:"+head))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("head %s: err = %v, want %q", head, err, want)
		}
	}
}

// TestZodSchemas: a Zod schema without toJSONSchema() (Zod 4.0 and 4.1,
// which the original's bundles carry) becomes the JSON Schema Zod's own
// z.toJSONSchema gives, in the descriptor, in runtime.extract and for the
// casRef fields of a step. Before, such a schema was refused.
func TestZodSchemas(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	b := loadTestdata(t, "zod_schemas.esm.js")
	outs, done, err := drive(t, b, h, threadFor(b, "go"))
	if err != nil || done == nil || len(outs) != 1 {
		t.Fatalf("run: %v %+v", err, done)
	}
	// What z.toJSONSchema of the same Zod 4.0 schema returns, less $schema.
	want := `{"type":"object","properties":{"phase":{"casRef":true,"description":"phase hash","type":"string"},` +
		`"count":{"type":"integer"},"status":{"type":"string","enum":["a","b"]},"note":{"anyOf":[{"type":"string"},{"type":"null"}]},` +
		`"kind":{"type":"string","const":"x"},"tags":{"default":[],"type":"array","items":{"type":"string"}},` +
		`"either":{"anyOf":[{"type":"string"},{"type":"boolean"}]}},"required":["phase","status","note","kind","tags","either"],"additionalProperties":false}`
	described, _ := outs[0].Meta.Get("described")
	if described != want {
		t.Errorf("descriptor schema =\n%s\nwant\n%s", described, want)
	}
	if len(h.extracted) != 1 || h.extracted[0] != want {
		t.Errorf("runtime.extract sent %q, want %s", h.extracted, want)
	}
	phase, _ := outs[0].Meta.Get("phase")
	if len(outs[0].Refs) != 2 || outs[0].Refs[0] != phase {
		t.Errorf("refs = %v, want the casRef field %v then the content", outs[0].Refs, phase)
	}
}
