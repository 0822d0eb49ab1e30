package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// cli runs commands in-process against one storage root.
type cli struct {
	t    *testing.T
	root string
	env  map[string]string
}

func newCLI(t *testing.T) *cli {
	root := filepath.Join(t.TempDir(), "root")
	return &cli{t: t, root: root, env: map[string]string{storage.EnvRoot: root}}
}

// fixtureCLI works on a copy of testdata/original-root.
func fixtureCLI(t *testing.T) *cli {
	c := newCLI(t)
	if err := os.CopyFS(c.root, os.DirFS("testdata/original-root")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return c.env[k] }})
	return out.String(), errb.String(), code
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errs, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errs)
	}
	return out
}

func (c *cli) fails(want string, args ...string) {
	c.t.Helper()
	out, errs, code := c.run(args...)
	if code != 1 {
		c.t.Fatalf("%v: exit %d, want 1\nstdout: %s", args, code, out)
	}
	if !strings.Contains(errs, want) {
		c.t.Fatalf("%v: stderr %q lacks %q", args, errs, want)
	}
}

// snapshot records every file under the root, to prove a failed command
// changed nothing.
func (c *cli) snapshot() map[string]string {
	files := map[string]string{}
	// An unreadable entry (or a root not made yet) is left out, not fatal.
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".lock") {
			b, _ := os.ReadFile(p)
			files[p] = string(b)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return files
}

func (c *cli) unchanged(before map[string]string) {
	c.t.Helper()
	after := c.snapshot()
	if len(after) != len(before) {
		c.t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			c.t.Fatalf("%s changed", p)
		}
	}
}

func TestCasPutGetMatchesTheOriginal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if got := c.ok("cas", "put", "hello"); got != "SSVQ0RZ55P9Y4\n" {
		t.Fatalf("cas put hello = %q", got)
	}
	if got := c.ok("cas", "get", "SSVQ0RZ55P9Y4"); got != "type: content\npayload: hello\nrefs: []\n" {
		t.Fatalf("cas get = %q", got)
	}
	if got := c.ok("cas", "get", "ssvq0rz55p9y4"); !strings.HasPrefix(got, "type: content") {
		t.Fatalf("lower-case get = %q", got)
	}
	var asJSON map[string]string
	if err := json.Unmarshal([]byte(c.ok("cas", "get", "SSVQ0RZ55P9Y4", "--json")), &asJSON); err != nil {
		t.Fatal(err)
	}
	if asJSON["hash"] != "SSVQ0RZ55P9Y4" || asJSON["content"] == "" {
		t.Fatalf("get --json = %v", asJSON)
	}
	c.ok("cas", "put", "world")
	if got := c.ok("cas", "list"); len(strings.Fields(got)) != 2 {
		t.Fatalf("cas list = %q", got)
	}
	if got := c.ok("cas", "list", "--limit", "1", "--offset", "1"); len(strings.Fields(got)) != 1 {
		t.Fatalf("cas list page = %q", got)
	}
	if got := c.ok("cas", "list", "--json", "--offset", "5"); strings.TrimSpace(got) != "{\n  \"hashes\": []\n}" {
		t.Fatalf("empty page json = %q", got)
	}
	if got := c.ok("cas", "rm", "SSVQ0RZ55P9Y4"); got != "removed cas entry SSVQ0RZ55P9Y4\n" {
		t.Fatalf("rm = %q", got)
	}
	c.fails("cas entry not found: SSVQ0RZ55P9Y4", "cas", "get", "SSVQ0RZ55P9Y4")
	c.fails("cas entry not found: SSVQ0RZ55P9Y4", "cas", "rm", "SSVQ0RZ55P9Y4")
}

func TestCasBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("cas", "put", "x")
	before := c.snapshot()
	c.fails("invalid hash", "cas", "get", "../../etc/passwd")
	c.fails("invalid hash", "cas", "rm", "SSVQ0RZ55P9Y")
	c.fails("invalid Crockford Base32 character: 'U'", "cas", "get", "SSVQ0RZ55P9YU")
	c.fails("cas get requires <hash>", "cas", "get")
	c.fails("cas put requires <content>", "cas", "put")
	c.fails("cas rm requires <hash>", "cas", "rm")
	c.fails("cas list takes no arguments", "cas", "list", "x")
	c.fails("gc takes no arguments", "cas", "gc", "x")
	c.fails("too many arguments", "cas", "put", "a", "b")
	c.fails("--limit must be a non-negative integer", "cas", "list", "--limit", "-1")
	c.fails("unknown flag", "cas", "list", "--bogus")
	c.unchanged(before)
}

func TestUsageAndDispatch(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, _, code := c.run()
	if code != 1 || !strings.HasPrefix(out, "uncaged-workflow — workflow engine CLI\n\n") {
		t.Fatalf("no args: exit %d, %q", code, out)
	}
	for _, want := range []string{"Workflow registry:", "Thread execution:", "Content-addressable storage:",
		"workflow add <name> <file.yaml|.esm.js> [--types <path>]", "Register a YAML workflow or a JavaScript bundle",
		"cas gc", "Garbage-collect unreferenced CAS entries", "Use <command> --help for subcommand details.",
		"Environment variables:", "UNCAGED_WORKFLOW_STORAGE_ROOT", "WORKFLOW_STORAGE_ROOT"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	c.fails(`unknown command "frobnicate" for "uncaged-workflow"`, "frobnicate")
	out, _, code = c.run("workflow")
	if code != 1 || !strings.HasPrefix(out, "workflow subcommands:") || !strings.Contains(out, "uncaged-workflow workflow rollback <name> [hash]") {
		t.Fatalf("bare group: %d %q", code, out)
	}
	for _, g := range []string{"workflow", "thread", "cas"} {
		out, _, code = c.run(g, "--help")
		if code != 0 || !strings.HasPrefix(out, g+" subcommands:") {
			t.Errorf("%s --help: %d %q", g, code, out)
		}
	}
	c.fails(`unknown command "frob" for "uncaged-workflow cas"`, "cas", "frob")
	if out := c.ok("cas", "gc", "--help"); !strings.Contains(out, "--json") {
		t.Errorf("command help = %q", out)
	}
	if out := c.ok("completion", "bash"); !strings.Contains(out, "uncaged-workflow") {
		t.Errorf("completion = %.80q", out)
	}
	if out := c.ok("version"); !strings.HasPrefix(out, "uncaged-workflow ") {
		t.Errorf("version = %q", out)
	}
}

// bundleSource is a minimal valid bundle; tag makes each version distinct.
func bundleSource(tag string) []byte {
	return []byte(`export const descriptor = { description: "` + tag + `", roles: { greeter: { description: "greets", schema: { type: "object" } } }, graph: { edges: [] } };
export const run = async function* () { return { returnCode: 0, summary: "` + tag + `" }; };
`)
}

func TestWorkflowLifecycle(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := t.TempDir()
	bundle := filepath.Join(src, "greet.esm.js")
	if err := os.WriteFile(bundle, bundleSource("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := c.run("workflow", "add", "greet-user", bundle)
	if code != 0 || !strings.HasPrefix(out, `registered workflow "greet-user" from greet.esm.js as `) {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	if !strings.Contains(errs, "optional types file not found (greet.d.ts); skipped") {
		t.Errorf("missing types warning: %q", errs)
	}
	hash1 := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
	if _, err := os.Stat(filepath.Join(c.root, "bundles", hash1+".esm.js")); err != nil {
		t.Fatal("bundle not stored")
	}
	desc, err := os.ReadFile(filepath.Join(c.root, "bundles", hash1+".yaml"))
	if err != nil || !strings.HasPrefix(string(desc), "\"description\": \"v1\"\n\"roles\":\n  \"greeter\":") {
		t.Fatalf("descriptor sidecar = %q, %v", desc, err)
	}
	// Second version with a .d.ts beside it.
	if err := os.WriteFile(bundle, bundleSource("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "greet.d.ts"), []byte("export {};\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = c.ok("workflow", "add", "greet-user", bundle)
	hash2 := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
	if hash2 == hash1 {
		t.Fatal("different bundles, same hash")
	}
	if _, err := os.Stat(filepath.Join(c.root, "bundles", hash2+".d.ts")); err != nil {
		t.Fatal("types sidecar not stored")
	}
	list := c.ok("workflow", "list", "-o", "table")
	if f := strings.Fields(strings.Split(list, "\n")[1]); len(f) < 3 || f[0] != "greet-user" || f[1] != hash2 || f[2] != "2" {
		t.Fatalf("list = %q", list)
	}
	show := c.ok("workflow", "show", "greet-user")
	if !strings.HasPrefix(show, "\"greet-user\":\n  \"hash\": \""+hash2+"\"") || !strings.Contains(show, hash1) {
		t.Fatalf("show = %q", show)
	}
	var shown struct {
		Name    string
		Hash    string
		History []struct{ Hash string }
	}
	if err := json.Unmarshal([]byte(c.ok("workflow", "show", "greet-user", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Name != "greet-user" || shown.Hash != hash2 || len(shown.History) != 1 {
		t.Fatalf("show --json = %+v", shown)
	}
	hist := strings.Split(strings.TrimSpace(c.ok("workflow", "history", "greet-user")), "\n")
	if len(hist) != 2 || !strings.HasPrefix(hist[0], hash2+"\t") || !strings.HasSuffix(hist[0], "\t(current)") || !strings.HasPrefix(hist[1], hash1+"\t") {
		t.Fatalf("history = %q", hist)
	}
	if got := c.ok("workflow", "rollback", "greet-user"); got != "rolled back workflow \"greet-user\"\n" {
		t.Fatalf("rollback = %q", got)
	}
	if list := c.ok("workflow", "list"); !strings.Contains(list, hash1) {
		t.Fatalf("after rollback list = %q", list)
	}
	c.ok("workflow", "rollback", "greet-user", hash2)
	// Rollback to a version whose bundle file is gone is refused and changes nothing.
	if err := os.Remove(filepath.Join(c.root, "bundles", hash1+".esm.js")); err != nil {
		t.Fatal(err)
	}
	before := c.snapshot()
	c.fails("bundle file not found for hash "+hash1, "workflow", "rollback", "greet-user", hash1)
	c.unchanged(before)
	c.fails("hash not found in history: SSVQ0RZ55P9Y4", "workflow", "rollback", "greet-user", "SSVQ0RZ55P9Y4")
	if got := c.ok("workflow", "remove", "greet-user"); got != "removed workflow \"greet-user\" from registry\n" {
		t.Fatalf("remove alias = %q", got)
	}
	if got := c.ok("workflow", "list"); got != "(no workflows registered)\n" {
		t.Fatalf("empty list = %q", got)
	}
	if got := c.ok("workflow", "list", "--json"); strings.TrimSpace(got) != "[]" {
		t.Fatalf("empty list json = %q", got)
	}
}

func TestWorkflowAddRejectsAndChangesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := t.TempDir()
	src0 := src
	good := filepath.Join(src, "flow.esm.js")
	if err := os.WriteFile(good, bundleSource("good"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := filepath.Join(src, "flow.ts")
	if err := os.WriteFile(ts, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(src, "flow.js")
	if err := os.WriteFile(js, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(src, "empty.esm.js")
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(src, "bin.esm.js")
	if err := os.WriteFile(binary, []byte{0xff, 0xfe, 0x00}, 0o644); err != nil {
		t.Fatal(err)
	}
	jsCase := func(name, src string) string {
		p := filepath.Join(src0, name+".esm.js")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noRun := jsCase("norun", `export const descriptor = { description: "d", roles: {}, graph: { edges: [] } }; export const run = 5;`)
	withDefault := jsCase("default", `export default {}; export const run = async function* () {}; export const descriptor = {};`)
	throwing := jsCase("throwing", "export const descriptor = { description: \"d\", roles: {}, graph: { edges: [] } };\nthrow new Error(\"top-level boom\");\nexport const run = async function* () {};")
	envRead := jsCase("envread", `const key = process.env.SURELY_UNSET_VARIABLE_42; export const descriptor = { description: key, roles: {}, graph: { edges: [] } }; export const run = async function* () {};`)
	badDesc := jsCase("baddesc", `export const descriptor = { description: "d", roles: { r: { description: "x" } }, graph: { edges: [] } }; export const run = async function* () {};`)
	lodash := jsCase("lodash", `import _ from "lodash"; export const descriptor = _; export const run = async function* () {};`)
	syntax := jsCase("syntax", `export const run = async function* ( {`)
	c.ok("workflow", "add", "keep-me", good)
	before := c.snapshot()
	cases := []struct {
		want string
		args []string
	}{
		{"invalid workflow name: use verb-first kebab-case", []string{"workflow", "add", "Bad_Name", good}},
		{"file not found: " + filepath.Join(src, "nope.esm.js"), []string{"workflow", "add", "flow", filepath.Join(src, "nope.esm.js")}},
		{"file not found: " + src, []string{"workflow", "add", "flow", src}},
		{"build your .ts file first, then add the .esm.js", []string{"workflow", "add", "flow", ts}},
		{`workflow file must end with ".esm.js"`, []string{"workflow", "add", "flow", js}},
		{"is empty", []string{"workflow", "add", "flow", empty}},
		{"not valid UTF-8", []string{"workflow", "add", "flow", binary}},
		{"types file not found: /nope.d.ts", []string{"workflow", "add", "flow", good, "--types", "/nope.d.ts"}},
		{"missing value for --types", []string{"workflow", "add", "flow", good, "--types="}},
		{"add requires <name> <file>", []string{"workflow", "add", "flow"}},
		{"too many arguments", []string{"workflow", "add", "flow", good, "extra"}},
		{"workflow not registered: ghost", []string{"workflow", "rm", "ghost"}},
		{"workflow not found: ghost", []string{"workflow", "show", "ghost"}},
		{"workflow not found: ghost", []string{"workflow", "history", "ghost"}},
		{"workflow not registered: ghost", []string{"workflow", "rollback", "ghost"}},
		{"no history entry to rollback to", []string{"workflow", "rollback", "keep-me"}},
		{"invalid hash", []string{"workflow", "rollback", "keep-me", "../x"}},
		{"show requires <name>", []string{"workflow", "show"}},
		{"list takes no arguments", []string{"workflow", "list", "x"}},
		{"workflow bundle must export run as a callable", []string{"workflow", "add", "flow", noRun}},
		{"workflow bundle must not use default export", []string{"workflow", "add", "flow", withDefault}},
		{"top-level boom", []string{"workflow", "add", "flow", throwing}},
		{"throwing.esm.js:2", []string{"workflow", "add", "flow", throwing}},
		{"SURELY_UNSET_VARIABLE_42", []string{"workflow", "add", "flow", envRead}},
		{"descriptor.roles.r.schema must be a non-array object", []string{"workflow", "add", "flow", badDesc}},
		{`"lodash"`, []string{"workflow", "add", "flow", lodash}},
		{"failed to parse module", []string{"workflow", "add", "flow", syntax}},
	}
	for _, tc := range cases {
		c.fails(tc.want, tc.args...)
	}
	c.unchanged(before)
}

func TestBrokenRegistryIsReportedAndKept(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(c.root, "workflow.yaml")
	if err := os.WriteFile(reg, []byte("workflows:\n  a: [broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "ok.esm.js")
	if err := os.WriteFile(src, bundleSource("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := c.snapshot()
	c.fails(reg+": invalid YAML", "workflow", "list")
	c.fails(reg+": invalid YAML", "workflow", "add", "ok", src)
	c.fails(reg+": invalid YAML", "thread", "list")
	c.unchanged(before)
	if err := os.WriteFile(reg, []byte("workflows:\n  a: {hash: H, timestamp: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails(`workflow "a" must have a history array`, "workflow", "list")
}

func TestThreadCommandsOnOriginalStore(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	// Newest first: the active thread started last, the legacy one first.
	want := [][]string{
		{"THREAD", "WORKFLOW", "STATUS", "AGE", "DURATION"},
		{"06EZJ3QM9Q4S5XWA0R1C7D8E2G", "demo-flow", "interrupted"},
		{"06EZHZP3N4J2B8V6Q0T9W1X5Y4", "demo-flow", "completed"},
		{"06E0000000000000000000000C", "demo-flow", "completed"},
	}
	got := c.ok("thread", "list", "-o", "table")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("thread list:\n%s", got)
	}
	for i, w := range want {
		if f := strings.Fields(lines[i]); len(f) != 5 || !slices.Equal(f[:len(w)], w) {
			t.Fatalf("thread list line %d = %q, want %q…", i, lines[i], w)
		}
	}
	if got := c.ok("thread", "list", "demo-flow", "-o", "table", "--limit", "1", "--offset", "2"); !strings.HasPrefix(strings.Split(got, "\n")[1], "06E0000000000000000000000C  demo-flow  completed  ") {
		t.Fatalf("filtered page = %q", got)
	}
	c.fails("workflow not registered: other-flow", "thread", "list", "other-flow")

	var done threadView
	if err := json.Unmarshal([]byte(c.ok("thread", "show", "06EZHZP3N4J2B8V6Q0T9W1X5Y4")), &done); err != nil {
		t.Fatal(err)
	}
	if done.Source != threads.SourceHistory || done.Status != threads.StatusCompleted || done.ParentState != nil ||
		done.Head != "DXAGP9TW6ZX9Y" || len(done.Steps) != 1 || done.Steps[0].Role != "planner" ||
		done.Steps[0].Content != "plan-text" || done.Steps[0].ChildThread != nil || done.Steps[0].Hash != "EY4NX8J6373TT" {
		t.Fatalf("finished thread = %+v", done)
	}
	raw := c.ok("thread", "show", "06ezj3qm9q4s5xwa0r1c7d8e2g")
	for _, key := range []string{`"parentState": null`, `"childThread": null`, `"source": "active"`, `"status": "interrupted"`} {
		if !strings.Contains(raw, key) {
			t.Errorf("active thread show lacks %s:\n%s", key, raw)
		}
	}
	var legacy threadView
	if err := json.Unmarshal([]byte(c.ok("thread", "show", "06E0000000000000000000000C")), &legacy); err != nil {
		t.Fatal(err)
	}
	if len(legacy.Steps) != 1 || legacy.Steps[0].Content != "legacy answer" {
		t.Fatalf("legacy thread = %+v", legacy)
	}
	c.fails("thread not found: 06EZZZZZZZZZZZZZZZZZZZZZZZ", "thread", "show", "06EZZZZZZZZZZZZZZZZZZZZZZZ")
	c.fails("letters and digits only", "thread", "show", "../../etc")
	// The same rule as the API: a made-up id is not found, not malformed.
	c.fails("thread not found: nonexistent-id", "thread", "show", "nonexistent-id")
	c.fails("show requires <id>", "thread", "show")

	if got := c.ok("cas", "gc"); got != "scanned 6 threads, 14 active refs, deleted 1 entries\n" {
		t.Fatalf("gc = %q", got)
	}
	if got := c.ok("cas", "gc"); got != "scanned 6 threads, 14 active refs, deleted 0 entries\n" {
		t.Fatalf("second gc = %q", got)
	}

	// rm drops the thread's indexes, its log and the blobs only it reached.
	if got := c.ok("thread", "rm", "06EZJ3QM9Q4S5XWA0R1C7D8E2G"); got != "removed thread 06EZJ3QM9Q4S5XWA0R1C7D8E2G\n" {
		t.Fatalf("rm = %q", got)
	}
	c.fails("thread not found", "thread", "show", "06EZJ3QM9Q4S5XWA0R1C7D8E2G")
	for _, h := range []string{"YQDQ3X4EH1VP2", "AB2BP0Y50PSY6", "E1WKMKN5BHPQR"} {
		c.fails("cas entry not found", "cas", "get", h)
	}
	c.ok("cas", "get", "TE2CRJNW51W4G")
	if _, err := os.Stat(filepath.Join(c.root, "logs", "HEXEJQQQ6EVYJ", "06EZJ3QM9Q4S5XWA0R1C7D8E2G.info.jsonl")); !os.IsNotExist(err) {
		t.Fatal("debug log not removed")
	}
	c.ok("thread", "rm", "06EZHZP3N4J2B8V6Q0T9W1X5Y4")
	hist, _ := os.ReadFile(filepath.Join(c.root, "bundles", "HEXEJQQQ6EVYJ", "history", "2026-05-05.jsonl"))
	if len(hist) != 0 {
		t.Fatalf("history row kept: %q", hist)
	}
	c.fails("cas entry not found", "cas", "get", "TE2CRJNW51W4G")
}

// The original's gc-cli test: one thread whose head and start are its start
// node, plus an orphan.
func TestGCLineLikeTheOriginal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	prompt := strings.TrimSpace(c.ok("cas", "put", "prompt"))
	b, _ := node.NewStart(node.StartPayload{Name: "demo", Hash: "B"}, prompt).Marshal()
	start := strings.TrimSpace(c.ok("cas", "put", string(b)))
	c.ok("cas", "put", "orphan")
	if err := threads.Upsert(l.BundleDir("B"), "T1", threads.Entry{Head: start, Start: start, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if got := c.ok("cas", "gc"); got != "scanned 2 threads, 2 active refs, deleted 1 entries\n" {
		t.Fatalf("gc = %q", got)
	}
	// thread rm runs GC: the prompt, reachable only from that thread, goes.
	c.ok("thread", "rm", "T1")
	c.fails("cas entry not found", "cas", "get", prompt)
	if got := c.ok("thread", "list"); got != "(no threads found)\n" {
		t.Fatalf("empty list = %q", got)
	}
}

func TestLiveArgumentsAndTargets(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.fails("live requires <thread-id> or --latest", "live")
	c.fails("live --latest does not take <thread-id>", "live", "--latest", "06EZJ3QM9Q4S5XWA0R1C7D8E2G")
	c.fails("unexpected extra argument", "thread", "live", "A", "B")
	c.fails("unknown flag: --bogus", "live", "--bogus")
	c.fails("live: no threads found", "live", "--latest")
	c.fails("thread not found: 06EZJ3QM9Q4S5XWA0R1C7D8E2G", "live", "06EZJ3QM9Q4S5XWA0R1C7D8E2G")
	if got := c.ok("thread", "ps"); got != "(no running threads)\n" {
		t.Fatalf("ps without a host = %q", got)
	}
	c.fails("run requires <name>", "run")
	c.fails("invalid workflow name", "run", "Bad")
	c.fails("workflow not registered: nope", "thread", "run", "nope", "--prompt", "x")
	c.fails("fork requires <thread-id>", "thread", "fork")
	c.fails("unexpected argument: extra", "thread", "fork", "A", "extra")
	c.fails("thread not found: A", "thread", "fork", "A")
	c.fails("--step must be 1 or more", "thread", "fork", "A", "--step", "0")
	c.fails("--step and --from-role choose the fork point two ways", "thread", "fork", "A", "--step", "2", "--from-role", "x")
	c.fails("thread not found: A", "thread", "pause", "A")
}

// A finished thread streams its whole chain and exits at once.
func TestLiveOnAFinishedThread(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	out := c.ok("live", "06EZHZP3N4J2B8V6Q0T9W1X5Y4")
	lines := strings.Split(out, "\n")
	if len(lines) < 4 || !strings.HasSuffix(lines[0], "] ▶ planner") || lines[1] != "  plan-text" || lines[2] != "  meta: {\"plan\":1}" || lines[3] != "completed: returnCode=0 — done" {
		t.Fatalf("live output:\n%s", out)
	}
	if out := c.ok("live", "06EZHZP3N4J2B8V6Q0T9W1X5Y4", "--role", "nobody"); !strings.HasPrefix(out, "completed: returnCode=0") {
		t.Fatalf("--role filter:\n%s", out)
	}
}

func TestLiveStepRendering(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	lines := make([]string, 12)
	for i := range lines {
		lines[i] = fmt.Sprintf("LINE%d", i+1)
	}
	c := newCLI(t)
	store := cas.Open(filepath.Join(c.root, "cas"))
	content, _ := store.Put(strings.Join(lines, "\n"))
	writeLiveStep(&b, store, threads.Frame{Hash: "H", State: node.State{Payload: node.StatePayload{Role: "coder", Content: content, Meta: canonyaml.Map{{Key: "ok", Value: true}}}}}, liveStyle{})
	out := b.String()
	if !strings.Contains(out, "  LINE10\n") || strings.Contains(out, "LINE11") || !strings.Contains(out, "  … (2 more lines)\n") || !strings.HasSuffix(out, "  meta: {\"ok\":true}\n") {
		t.Fatalf("rendered step:\n%s", out)
	}
	if got := formatDebugLine(0, "TAG1", "a\nb"); !strings.Contains(got, "[TAG1] a b") || strings.Contains(got, "\n") {
		t.Fatalf("debug line = %q", got)
	}
}
