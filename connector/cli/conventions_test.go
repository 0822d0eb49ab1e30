package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// usage runs a command line that must be refused as a usage error: exit
// code 1, nothing on stdout, and on stderr exactly the reason and the hint.
func (c *cli) usage(reason, hint string, args ...string) {
	c.t.Helper()
	out, errs, code := c.run(args...)
	if code != 1 || out != "" || errs != reason+"\n"+hint+"\n" {
		c.t.Fatalf("%q: exit %d\nstdout %q\nstderr %q\nwant stderr %q", args, code, out, errs, reason+"\n"+hint+"\n")
	}
}

func TestUnknownCommandIsOneLineWithTheNearestCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const rootHint = "Run 'uncaged-workflow --help' for the list of commands."
	c.usage(`unknown command "runn" for "uncaged-workflow" (did you mean "run"?)`, rootHint, "runn")
	c.usage(`unknown command "wrkflow" for "uncaged-workflow" (did you mean "workflow"?)`, rootHint, "wrkflow", "list")
	c.usage(`unknown command "thred" for "uncaged-workflow" (did you mean "thread"?)`, rootHint, "thred", "list", "--json")
	// A subcommand typed without its group.
	c.usage(`unknown command "kill" for "uncaged-workflow" (did you mean "thread kill"?)`, rootHint, "kill", "X")
	c.usage(`unknown command "frobnicate" for "uncaged-workflow"`, rootHint, "frobnicate")

	const threadHint = "Run 'uncaged-workflow thread --help' for its commands."
	c.usage(`unknown command "lst" for "uncaged-workflow thread" (did you mean "list"?)`, threadHint, "thread", "lst")
	// Flags after a mistyped subcommand are not what went wrong.
	c.usage(`unknown command "lst" for "uncaged-workflow thread" (did you mean "list"?)`, threadHint, "thread", "lst", "--json")
	c.usage(`unknown command "lst" for "uncaged-workflow thread" (did you mean "list"?)`, threadHint, "--storage-root", c.root, "thread", "lst", "-o", "wide")
	c.usage(`unknown command "remov" for "uncaged-workflow workflow" (did you mean "rm"?)`,
		"Run 'uncaged-workflow workflow --help' for its commands.", "workflow", "remov", "x")
	c.usage(`unknown command "zz" for "uncaged-workflow cas"`, "Run 'uncaged-workflow cas --help' for its commands.", "cas", "zz")
	// Nothing was created for a command that was not understood.
	if _, err := os.Stat(c.root); !os.IsNotExist(err) {
		t.Fatalf("the storage root exists after usage errors: %v", err)
	}
}

func TestUnknownFlagNamesTheNearestFlag(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.usage("unknown flag: --promt (did you mean --prompt?)", "Run 'uncaged-workflow run --help' for its flags.", "run", "hello", "--promt", "x")
	c.usage("unknown flag: --jsn (did you mean --json?)", "Run 'uncaged-workflow thread list --help' for its flags.", "thread", "list", "--jsn")
	c.usage("unknown flag: --storage-rot (did you mean --storage-root?)", "Run 'uncaged-workflow cas list --help' for its flags.", "cas", "list", "--storage-rot", "x")
	c.usage("unknown flag: --frobnicate", "Run 'uncaged-workflow thread list --help' for its flags.", "thread", "list", "--frobnicate")
	// A root flag's value is not taken for a command name.
	c.usage("unknown flag: --bogus", "Run 'uncaged-workflow --help' for the list of commands.", "--storage-root", c.root, "--bogus")
	// A flag named like a command means the command.
	c.usage(`unknown flag: --version (did you mean "uncaged-workflow version"?)`, "Run 'uncaged-workflow --help' for the list of commands.", "--version")
	c.usage("unknown shorthand flag: 'x' in -x", "Run 'uncaged-workflow thread list --help' for its flags.", "thread", "list", "-x")
	c.usage(`invalid argument "many" for "--limit" flag: strconv.ParseInt: parsing "many": invalid syntax`,
		"Run 'uncaged-workflow thread list --help' for its flags.", "thread", "list", "--limit", "many")
}

func TestUnknownWorkflowNamesTheNearestAndTheList(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	bundle := filepath.Join(t.TempDir(), "hello.esm.js")
	if err := os.WriteFile(bundle, bundleSource("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", "hello", bundle)
	before := c.snapshot()
	for _, tc := range []struct {
		wording string
		args    []string
	}{
		{"workflow not registered", []string{"run", "helo"}},
		{"workflow not registered", []string{"thread", "run", "helo", "--prompt", "x"}},
		{"workflow not registered", []string{"thread", "list", "helo"}},
		{"workflow not found", []string{"workflow", "show", "helo"}},
		{"workflow not found", []string{"workflow", "history", "helo"}},
		{"workflow not registered", []string{"workflow", "rm", "helo"}},
		{"workflow not registered", []string{"workflow", "rollback", "helo"}},
	} {
		_, errs, code := c.run(tc.args...)
		want := tc.wording + ": helo (did you mean \"hello\"?)\nsee `uncaged-workflow workflow list`\n"
		if code != 1 || errs != want {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, errs, want)
		}
	}
	// Nothing near: no guess, still the pointer to the list.
	if _, errs, _ := c.run("run", "deploy-everything"); errs != "workflow not registered: deploy-everything\nsee `uncaged-workflow workflow list`\n" {
		t.Errorf("no near name: %q", errs)
	}
	c.unchanged(before)
}

// A thread of the table fixtures: its bundle, when it started and ended
// (ended zero: still in threads.json), and how (returnCode).
type listedThread struct {
	id, bundle    string
	started, done time.Time
	returnCode    int
}

// writeThreads stores each thread the way the executor leaves it: a start
// node, and for a finished one an __end__ node and a history line.
func writeThreads(t *testing.T, root string, list []listedThread) {
	t.Helper()
	l := storage.Layout{Root: root}
	store := cas.Open(l.CASDir())
	for _, th := range list {
		prompt, err := store.Put("prompt of " + th.id)
		if err != nil {
			t.Fatal(err)
		}
		start, err := store.PutNode(node.NewStart(node.StartPayload{Name: "flow", Hash: th.bundle}, prompt))
		if err != nil {
			t.Fatal(err)
		}
		dir := l.BundleDir(th.bundle)
		if th.done.IsZero() {
			if err := threads.Upsert(dir, th.id, threads.Entry{Head: start, Start: start, UpdatedAt: th.started.UnixMilli()}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		summary, _ := store.Put("summary of " + th.id)
		meta := canonyaml.Map{{Key: "returnCode", Value: th.returnCode}, {Key: "summary", Value: "ended " + th.id}}
		end, err := store.PutNode(node.NewState(node.StatePayload{Role: node.RoleEnd, Meta: meta, Start: start, Content: summary, Ancestors: []string{}, Timestamp: th.done.UnixMilli()}))
		if err != nil {
			t.Fatal(err)
		}
		if err := threads.AppendHistory(dir, threads.HistoryEntry{ThreadID: th.id, Head: end, Start: start, CompletedAt: th.done.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
}

// fields splits a table's lines into cells (none of them holds a space).
func fields(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func TestThreadListIsNewestFirstWithStatusAgeAndDuration(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	now := time.Now()
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	// Bundle hashes sort the other way round from start times, as the old
	// order (by bundle hash, then id) would show.
	newest := listedThread{id: ids.NewThreadID(at(2 * time.Minute)), bundle: "DDDDDDDDDDDDD", started: at(2 * time.Minute)}
	failed := listedThread{id: ids.NewThreadID(at(3 * time.Hour)), bundle: "CCCCCCCCCCCCC", started: at(3 * time.Hour), done: at(3*time.Hour - 90*time.Second), returnCode: 1}
	killed := listedThread{id: ids.NewThreadID(at(50 * time.Hour)), bundle: "BBBBBBBBBBBBB", started: at(50 * time.Hour), done: at(50*time.Hour - 10*time.Minute), returnCode: 130}
	oldest := listedThread{id: ids.NewThreadID(at(20 * 24 * time.Hour)), bundle: "AAAAAAAAAAAAA", started: at(20 * 24 * time.Hour), done: at(20*24*time.Hour - 5*time.Second)}
	writeThreads(t, c.root, []listedThread{oldest, killed, newest, failed})

	want := [][]string{
		{"THREAD", "WORKFLOW", "STATUS", "AGE", "DURATION"},
		{newest.id, "(unknown)", "interrupted", "2m0s", "0s"},
		{failed.id, "(unknown)", "failed", "3h0m", "1m30s"},
		{killed.id, "(unknown)", "killed", "2d2h", "10m"},
		{oldest.id, "(unknown)", "completed", "20d", "5s"},
	}
	got := fields(c.ok("thread", "list", "-o", "table"))
	if len(got) != len(want) {
		t.Fatalf("thread list = %q", got)
	}
	for i := range want {
		// The age of the newest thread grows while the test runs.
		if i == 1 && len(got[i]) == 5 && regexp.MustCompile(`^2m\d+s$`).MatchString(got[i][3]) {
			got[i][3] = "2m0s"
		}
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("line %d = %q, want %q", i, got[i], want[i])
		}
	}
	if got := fields(c.ok("thread", "list", "-o", "table", "--limit", "2")); len(got) != 3 || got[1][0] != newest.id || got[2][0] != failed.id {
		t.Errorf("--limit 2 = %q, want the two newest", got)
	}
	if got := fields(c.ok("thread", "list", "-o", "table", "--limit", "1", "--offset", "3")); len(got) != 2 || got[1][0] != oldest.id {
		t.Errorf("the last page = %q", got)
	}

	wide := fields(c.ok("thread", "list", "-o", "wide"))
	if !slices.Equal(wide[0], []string{"THREAD", "WORKFLOW", "STATUS", "AGE", "DURATION", "STARTED", "UPDATED", "BUNDLE", "HEAD", "SOURCE"}) {
		t.Fatalf("wide header = %q", wide[0])
	}
	if row := wide[2]; len(row) != 10 || row[5] != time.UnixMilli(failed.started.UnixMilli()).Local().Format(time.RFC3339) || row[7] != failed.bundle || row[9] != "history" {
		t.Errorf("wide row = %q", row)
	}

	// --json: every record, in the same order, with the original's fields.
	raw := c.ok("thread", "list", "--json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[0]["threadId"] != newest.id || rows[3]["threadId"] != oldest.id || rows[1]["status"] != "failed" {
		t.Fatalf("--json = %s", raw)
	}
	for _, key := range []string{"threadId", "bundleHash", "workflow", "source", "status", "head", "start", "updatedAt"} {
		if _, ok := rows[1][key]; !ok {
			t.Errorf("--json lacks %q: %v", key, rows[1])
		}
	}
	if rows[2]["startedAt"] != float64(killed.started.UnixMilli()) {
		t.Errorf("startedAt = %v, want %d", rows[2]["startedAt"], killed.started.UnixMilli())
	}
	if got := c.ok("thread", "list", "-o", "json"); got != raw {
		t.Errorf("-o json differs from --json:\n%s", got)
	}
	var two []threadRow
	if err := json.Unmarshal([]byte(c.ok("thread", "list", "--json", "--limit", "2")), &two); err != nil || len(two) != 2 || two[0].ThreadID != newest.id || two[1].ThreadID != failed.id {
		t.Errorf("--json --limit 2 = %+v, %v", two, err)
	}

	before := c.snapshot()
	c.fails(`invalid --output "wid" (did you mean "wide"?): use table, wide, json`, "thread", "list", "-o", "wid")
	c.fails(`invalid --output "yaml": use table, wide, json`, "thread", "list", "--output", "yaml")
	c.unchanged(before)
}

func TestWorkflowListShowsReadableTimes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := t.TempDir()
	bundle := filepath.Join(src, "greet.esm.js")
	if err := os.WriteFile(bundle, bundleSource("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", "greet", bundle)
	if err := os.WriteFile(bundle, bundleSource("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", "greet", bundle)
	yaml := filepath.Join(src, "hello.yaml")
	if err := os.WriteFile(yaml, []byte("version: 1\ndescription: d\nroles:\n  r: {description: d, prompt: p, agent: {type: exec, command: /bin/true}}\ngraph:\n  __start__: r\n  r: __end__\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", "hello", yaml)

	var listed []workflowRow
	if err := json.Unmarshal([]byte(c.ok("workflow", "list", "--json")), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("--json = %+v, %v", listed, err)
	}
	got := fields(c.ok("workflow", "list", "-o", "table"))
	want := [][]string{
		{"NAME", "HASH", "VERSIONS", "UPDATED"},
		{"greet", listed[0].Hash, "2", "just", "now"},
		{"hello", listed[1].Hash, "1", "just", "now"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("workflow list = %q, want %q", got, want)
	}
	if out := c.ok("workflow", "list", "-o", "table"); regexp.MustCompile(`\b\d{13}\b`).MatchString(out) {
		t.Fatalf("workflow list shows epoch milliseconds:\n%s", out)
	}
	wide := fields(c.ok("workflow", "list", "-o", "wide"))
	registered := time.UnixMilli(listed[1].Timestamp).Local().Format(time.RFC3339)
	if !slices.Equal(wide[0], []string{"NAME", "HASH", "VERSIONS", "UPDATED", "REGISTERED", "KIND"}) ||
		!slices.Equal(wide[2], []string{"hello", listed[1].Hash, "1", "just", "now", registered, "yaml"}) || wide[1][6] != "bundle" {
		t.Fatalf("workflow list -o wide = %q", wide)
	}
	c.fails(`invalid --output "jsn" (did you mean "json"?)`, "workflow", "list", "-o", "jsn")
}

func TestLiveSaysHowTheThreadEndedAndExitsSo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	start := time.Now().Add(-time.Hour)
	done := listedThread{id: ids.NewThreadID(start), bundle: "AAAAAAAAAAAAA", started: start, done: start.Add(time.Minute)}
	failed := listedThread{id: ids.NewThreadID(start.Add(time.Second)), bundle: "AAAAAAAAAAAAA", started: start, done: start.Add(time.Minute), returnCode: 1}
	killed := listedThread{id: ids.NewThreadID(start.Add(2 * time.Second)), bundle: "AAAAAAAAAAAAA", started: start, done: start.Add(time.Minute), returnCode: 130}
	writeThreads(t, c.root, []listedThread{done, failed, killed})
	for _, tc := range []struct {
		th   listedThread
		line string
		code int
	}{
		{done, "completed: returnCode=0 — ended " + done.id, 0},
		{failed, "failed: returnCode=1 — ended " + failed.id, 1},
		{killed, "killed: returnCode=130 — ended " + killed.id, 130},
	} {
		out, errs, code := c.run("live", tc.th.id)
		if code != tc.code || out != tc.line+"\n" || errs != "" {
			t.Errorf("live %s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.th.id, code, out, errs, tc.code, tc.line)
		}
	}
	help := c.ok("live", "--help")
	for _, want := range []string{"Exit codes", "0    the thread completed", "1    the thread failed", "130  the thread was killed"} {
		if !strings.Contains(help, want) {
			t.Errorf("live --help lacks %q:\n%s", want, help)
		}
	}
}

func TestReAddingTheCurrentVersionChangesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := t.TempDir()
	bundle := filepath.Join(src, "greet.esm.js")
	if err := os.WriteFile(bundle, bundleSource("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := c.ok("workflow", "add", "greet", bundle)
	hash := strings.TrimSpace(first[strings.LastIndex(first, " ")+1:])
	before := c.snapshot()
	out, _, code := c.run("workflow", "add", "greet", bundle)
	if code != 0 || out != `workflow "greet" unchanged: greet.esm.js is already its current version (`+hash+")\n" {
		t.Fatalf("re-add: exit %d, %q", code, out)
	}
	c.unchanged(before)
	if hist := strings.Split(strings.TrimSpace(c.ok("workflow", "history", "greet")), "\n"); len(hist) != 1 {
		t.Fatalf("history after re-add = %q", hist)
	}

	yaml := filepath.Join(src, "hello.yaml")
	if err := os.WriteFile(yaml, []byte("version: 1\ndescription: d\nroles:\n  r: {description: d, prompt: p, agent: {type: exec, command: /bin/true}}\ngraph:\n  __start__: r\n  r: __end__\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", "hello", yaml)
	before = c.snapshot()
	if out := c.ok("workflow", "add", "hello", yaml); !strings.HasPrefix(out, `workflow "hello" unchanged: hello.yaml is already its current version (`) {
		t.Fatalf("YAML re-add = %q", out)
	}
	c.unchanged(before)

	// The same bytes under another name, or a new version, are changes.
	c.ok("workflow", "add", "greet-too", bundle)
	if err := os.WriteFile(bundle, bundleSource("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("workflow", "add", "greet", bundle); !strings.HasPrefix(out, `registered workflow "greet"`) {
		t.Fatalf("new version = %q", out)
	}
	if hist := strings.Split(strings.TrimSpace(c.ok("workflow", "history", "greet")), "\n"); len(hist) != 2 {
		t.Fatalf("history after a new version = %q", hist)
	}
}

func TestGCSaysWhatTheGracePeriodSpared(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	orphan := strings.TrimSpace(c.ok("cas", "put", "stored, never linked"))
	// An engine host holds this lock while it runs.
	lock, err := atomicfile.TryLock(host.LockFile(storage.Layout{Root: c.root}))
	if err != nil {
		t.Fatal(err)
	}
	out := c.ok("cas", "gc")
	want := "scanned 0 threads, 0 active refs, deleted 0 entries\n" +
		"spared 1 unreferenced blob younger than 10 minutes: an engine host is running, and a running thread stores a step's content a moment before it links it; a later gc takes them once they are older, or when no host runs\n"
	if out != want {
		t.Fatalf("gc with a host running:\n%s\nwant\n%s", out, want)
	}
	var res struct{ SparedEntries int }
	if err := json.Unmarshal([]byte(c.ok("cas", "gc", "--json")), &res); err != nil || res.SparedEntries != 1 {
		t.Fatalf("gc --json: %+v, %v", res, err)
	}
	c.ok("cas", "get", orphan)
	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("cas", "gc"); out != "scanned 0 threads, 0 active refs, deleted 1 entries\n" {
		t.Fatalf("gc with no host = %q", out)
	}
	if help := c.ok("cas", "gc", "--help"); !strings.Contains(help, "younger than 10 minutes are spared") {
		t.Fatalf("gc --help:\n%s", help)
	}
}

// The examples are what a newcomer adds first, once setup has named a
// model: no warning about files they did not know they needed.
func TestExamplesAddWithoutWarnings(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("setup", "--provider", "p", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "--default-model", "p/m")
	for name, file := range map[string]string{
		"hello-world":           "../../examples/hello-world/hello-world.yaml",
		"hello-world-js":        "../../examples/hello-world/hello-world.esm.js",
		"plan-code-review":      "../../examples/plan-code-review/plan-code-review.esm.js",
		"plan-code-review-yaml": "../../examples/plan-code-review/plan-code-review.yaml",
	} {
		out, errs, code := c.run("workflow", "add", name, file)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "registered workflow") {
			t.Errorf("add %s: exit %d\nstdout %q\nstderr %q", file, code, out, errs)
		}
	}
	l := storage.Layout{Root: c.root}
	for _, name := range []string{"hello-world-js", "plan-code-review"} {
		var e struct{ Hash string }
		if err := json.Unmarshal([]byte(c.ok("workflow", "show", name, "--json")), &e); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(l.TypesFile(e.Hash)); err != nil {
			t.Errorf("%s: types not stored: %v", name, err)
		}
	}
}

// Help for adding a workflow names both kinds wherever it is listed.
func TestWorkflowAddHelpNamesYAML(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	usage, _, _ := c.run()
	group, _, _ := c.run("workflow")
	for what, text := range map[string]string{"usage": usage, "workflow": group, "workflow add --help": c.ok("workflow", "add", "--help")} {
		line := ""
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "workflow add") {
				line = l
				break
			}
		}
		if !strings.Contains(line, "<file.yaml|.esm.js>") {
			t.Errorf("%s: the add line %q does not name YAML files", what, line)
		}
		if !strings.Contains(text, "Register a YAML workflow or a JavaScript bundle") {
			t.Errorf("%s does not say what add registers:\n%s", what, text)
		}
	}
}
