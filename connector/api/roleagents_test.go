package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/yamlwf"
)

// registerYAML stores src as a YAML workflow version of name, with its
// descriptor, as `workflow add` does, and returns its hash. A source that
// does not parse is stored without a descriptor (a file damaged since).
func (f *fixture) registerYAML(name, src string) string {
	f.t.Helper()
	hash := ids.HashBytes([]byte(src))
	if err := registry.StoreFile(f.l.YAMLWorkflowFile(hash), "YAML workflow", []byte(src)); err != nil {
		f.t.Fatal(err)
	}
	if wf, err := yamlwf.Load([]byte(src), yamlwf.Options{}); err == nil {
		desc, err := wf.Descriptor().MarshalYAML()
		if err != nil {
			f.t.Fatal(err)
		}
		if err := registry.StoreFile(f.l.DescriptorFile(hash), "descriptor", desc); err != nil {
			f.t.Fatal(err)
		}
	}
	err := registry.Update(f.l.RegistryFile(), func(r *registry.Registry) error {
		r.Register(name, hash, time.Now().UnixMilli())
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return hash
}

// secrets are in the workflows' args and env below; no response may hold
// any of them.
var secrets = []string{"SECRET-ARG", "SECRET-ENV", "SECRET-INLINE-ARG", "SECRET-INLINE-ENV", "SECRET-DEFAULT-ENV"}

// roleAgentsOf is the raw roleAgents of a JSON body, compacted; "" when
// the body has no such key.
func roleAgentsOf(t *testing.T, body []byte) string {
	t.Helper()
	// A map keeps a null apart from a missing key, as the dashboard does.
	var v map[string]json.RawMessage
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	raw, ok := v["roleAgents"]
	if !ok {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The workflow page shows each role's agent: a YAML workflow's from its
// definition (named, inline or the default, of every kind), with only what
// names it — never args, env or a key — and null for a JavaScript bundle,
// whose code picks its agents, or a YAML file that no longer parses. Every
// route that shows one version says it.
func TestRoleAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The first version: a named default, which a role also names.
	namedDefault := f.registerYAML("review", `version: 1
description: the first version
agents:
  reviewer:
    type: cli
    model: sonnet
    command: /usr/bin/claude
    args: ["--key", "SECRET-ARG"]
    env: {API_KEY: SECRET-ENV}
agent: reviewer
roles:
  draft: {description: d, prompt: p}
  check: {description: d, prompt: p, agent: reviewer}
graph:
  __start__: draft
  draft: check
`)
	// The current version: every kind of agent, named, inline and by an
	// inline default.
	current := f.registerYAML("review", `version: 1
description: every kind of agent
agents:
  reviewer:
    type: cli
    model: sonnet
    command: /usr/bin/claude
    args: ["--key", "SECRET-ARG"]
    env: {API_KEY: SECRET-ENV}
  delegate: {type: workflow, workflow: child-flow}
  cursor: {type: cursor, env: {CURSOR_API_KEY: SECRET-ENV}}
agent: {type: llm, model: default, maxRounds: 3}
roles:
  plan: {description: d, prompt: p}
  review: {description: d, prompt: p, agent: reviewer}
  script:
    description: d
    prompt: p
    agent: {type: exec, command: /bin/echo, args: [SECRET-INLINE-ARG], env: {TOKEN: SECRET-INLINE-ENV}, timeout: 5000}
  edit: {description: d, prompt: p, agent: {type: react, model: coder, workspace: /srv/ws, tools: [read_file]}}
  hand-off: {description: d, prompt: p, agent: delegate}
  polish: {description: d, prompt: p, agent: cursor}
  chat: {description: d, prompt: p, agent: {type: hermes, model: m1, env: {K: SECRET-DEFAULT-ENV}}}
graph:
  __start__: plan
  plan: review
  review: script
  script: edit
  edit: hand-off
  hand-off: polish
  polish: chat
`)
	js := f.register("linear", "linear.esm.js")
	broken := ids.HashBytes([]byte("broken"))
	if err := registry.StoreFile(f.l.YAMLWorkflowFile(broken), "YAML workflow", []byte("version: 1\nroles: [\n")); err != nil {
		t.Fatal(err)
	}
	if err := registry.Update(f.l.RegistryFile(), func(r *registry.Registry) error {
		r.Register("damaged", broken, time.Now().UnixMilli())
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	const wantCurrent = `{"chat":{"type":"hermes","model":"m1"},` +
		`"edit":{"type":"react","model":"coder"},` +
		`"hand-off":{"type":"workflow","name":"delegate","workflow":"child-flow"},` +
		`"plan":{"type":"llm","model":"default"},` +
		`"polish":{"type":"cursor","name":"cursor"},` +
		`"review":{"type":"cli","name":"reviewer","model":"sonnet","command":"/usr/bin/claude"},` +
		`"script":{"type":"exec","command":"/bin/echo"}}`
	const wantFirst = `{"check":{"type":"cli","name":"reviewer","model":"sonnet","command":"/usr/bin/claude"},` +
		`"draft":{"type":"cli","name":"reviewer","model":"sonnet","command":"/usr/bin/claude"}}`
	for _, tc := range []struct{ path, want string }{
		{"/api/workflows/review", wantCurrent},
		{"/api/workflows/review/versions/" + current, wantCurrent},
		{"/api/workflows/review/versions/" + namedDefault, wantFirst},
		{"/api/bundles/" + current, wantCurrent},
		{"/api/bundles/" + namedDefault, wantFirst},
		{"/api/workflows/linear", "null"},
		{"/api/workflows/linear/versions/" + js, "null"},
		{"/api/bundles/" + js, "null"},
		{"/api/workflows/damaged", "null"},
		{"/api/workflows/damaged/versions/" + broken, "null"},
		{"/api/bundles/" + broken, "null"},
	} {
		rec := f.call(http.MethodGet, tc.path, "")
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: status %d; body %s", tc.path, rec.Code, rec.Body)
			continue
		}
		body := rec.Body.Bytes()
		if got := roleAgentsOf(t, body); got != tc.want {
			t.Errorf("GET %s: roleAgents\n got %s\nwant %s", tc.path, got, tc.want)
		}
		for _, s := range secrets {
			if bytes.Contains(body, []byte(s)) {
				t.Errorf("GET %s: the body holds %s: %s", tc.path, s, body)
			}
		}
	}

	// The bundle route shows the file's source with every agent's env
	// values and args hidden, and says which; one that does not parse is
	// not shown, since what in it is secret cannot be told.
	var b BundleDetail
	f.want(http.MethodGet, "/api/bundles/"+current, "", http.StatusOK, &b)
	wantHidden := []string{"agents.reviewer.args[0]", "agents.reviewer.args[1]", "agents.reviewer.env.API_KEY", "agents.cursor.env.CURSOR_API_KEY",
		"roles.script.agent.args[0]", "roles.script.agent.env.TOKEN", "roles.chat.agent.env.K"}
	if b.Kind != "yaml" || !strings.Contains(b.Source, "command: /usr/bin/claude") || strings.Join(b.Hidden, " ") != strings.Join(wantHidden, " ") || b.Withheld != "" {
		t.Fatalf("bundle: kind %s, hidden %q, withheld %q, source:\n%s", b.Kind, b.Hidden, b.Withheld, b.Source)
	}
	var damaged BundleDetail
	f.want(http.MethodGet, "/api/bundles/"+broken, "", http.StatusOK, &damaged)
	if damaged.Source != "" || !strings.Contains(damaged.Withheld, "does not parse") || damaged.Size == 0 {
		t.Fatalf("damaged bundle: %+v", damaged)
	}

	// Lists do not parse every workflow: they have no roleAgents.
	rec := f.call(http.MethodGet, "/api/workflows", "")
	if rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte("roleAgents")) {
		t.Errorf("list: status %d, body %s", rec.Code, rec.Body)
	}
}
