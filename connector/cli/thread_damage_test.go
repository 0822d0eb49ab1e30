package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/fleet"
)

// chain is a sound thread's nodes in the CAS: its prompt, start, two steps
// and, once finished, its __end__.
type chain struct {
	prompt, start, step1, step2, end string
}

// head is where the chain ends for a thread of source: its __end__ once
// finished, its last step while active.
func (c chain) head(source threads.Source) string {
	if source == threads.SourceHistory {
		return c.end
	}
	return c.step2
}

// putChain stores a sound chain whose nodes differ from every other tag's.
func putChain(t *testing.T, store *cas.Store, tag string) chain {
	t.Helper()
	put := func(n node.Node) string {
		h, err := store.PutNode(n)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	var c chain
	c.prompt = put(node.NewContent("the prompt of "+tag, nil))
	c.start = put(node.NewStart(node.StartPayload{Name: "flow", Hash: "B"}, c.prompt))
	out := put(node.NewContent("the output of "+tag, nil))
	step := func(role string, meta canonyaml.Map, parent string, anc []string) (string, []string) {
		p := node.StatePayload{Role: role, Meta: meta, Start: c.start, Content: out, Ancestors: node.Ancestors(parent, anc), Timestamp: 1778000000000}
		return put(node.NewState(p)), p.Ancestors
	}
	var anc []string
	c.step1, anc = step("planner", canonyaml.Map{}, "", nil)
	c.step2, anc = step("coder", canonyaml.Map{}, c.step1, anc)
	c.end, _ = step(node.RoleEnd, canonyaml.Map{{Key: "returnCode", Value: 0}, {Key: "summary", Value: "done"}}, c.step2, anc)
	return c
}

// flipped is hash with one character changed to another of the CAS's
// alphabet: a well-formed hash that names no blob.
func flipped(rng *rand.Rand, hash string) string {
	i := rng.IntN(len(hash))
	a := strings.IndexByte(ids.Alphabet, hash[i])
	c := ids.Alphabet[(a+1+rng.IntN(len(ids.Alphabet)-1))%len(ids.Alphabet)]
	return hash[:i] + string(c) + hash[i+1:]
}

// spoiler damages a thread whose sound chain is c (other is another
// thread's) and returns the head and start its line names.
type spoiler func(t *testing.T, rng *rand.Rand, casDir string, source threads.Source, c, other chain) (head, start string)

// replaceBlob puts something else where hash's blob is.
func replaceBlob(t *testing.T, casDir, hash string, with func(path string) error) {
	t.Helper()
	p := filepath.Join(casDir, hash+".txt")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := with(p); err != nil {
		t.Fatal(err)
	}
}

// damageCase is one way to damage a thread; name "" is the control case,
// nothing damaged.
type damageCase struct {
	name  string
	spoil spoiler
}

// lineDamage are the ways a readable line can name a head or start that
// cannot back a status (more are added where the system has them).
var lineDamage = []damageCase{
	{"", func(t *testing.T, _ *rand.Rand, _ string, s threads.Source, c, _ chain) (string, string) {
		return c.head(s), c.start
	}},
	{"head with a character flipped to another valid one", func(t *testing.T, rng *rand.Rand, _ string, s threads.Source, c, _ chain) (string, string) {
		return flipped(rng, c.head(s)), c.start
	}},
	{"head blob holding another node's bytes", func(t *testing.T, _ *rand.Rand, casDir string, s threads.Source, c, _ chain) (string, string) {
		b, err := os.ReadFile(filepath.Join(casDir, c.step1+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		replaceBlob(t, casDir, c.head(s), func(p string) error { return os.WriteFile(p, b, 0o644) })
		return c.head(s), c.start
	}},
	{"head blob that is not a node", func(t *testing.T, _ *rand.Rand, casDir string, s threads.Source, c, _ chain) (string, string) {
		replaceBlob(t, casDir, c.head(s), func(p string) error { return os.WriteFile(p, []byte("garbage\x00"), 0o644) })
		return c.head(s), c.start
	}},
	{"head that is a content node", func(t *testing.T, _ *rand.Rand, _ string, _ threads.Source, c, _ chain) (string, string) {
		return c.prompt, c.start
	}},
	{"head of another thread", func(t *testing.T, _ *rand.Rand, _ string, s threads.Source, c, other chain) (string, string) {
		return other.head(s), c.start
	}},
	{"head that is another thread's start", func(t *testing.T, _ *rand.Rand, _ string, _ threads.Source, c, other chain) (string, string) {
		return other.start, c.start
	}},
	{"head blob that is a directory", func(t *testing.T, _ *rand.Rand, casDir string, s threads.Source, c, _ chain) (string, string) {
		replaceBlob(t, casDir, c.head(s), func(p string) error { return os.Mkdir(p, 0o755) })
		return c.head(s), c.start
	}},
	{"head blob that is a link to nothing", func(t *testing.T, _ *rand.Rand, casDir string, s threads.Source, c, _ chain) (string, string) {
		replaceBlob(t, casDir, c.head(s), func(p string) error { return os.Symlink(p+".gone", p) })
		return c.head(s), c.start
	}},
	{"start with a character flipped to another valid one", func(t *testing.T, rng *rand.Rand, _ string, s threads.Source, c, _ chain) (string, string) {
		return c.head(s), flipped(rng, c.start)
	}},
	{"start blob removed", func(t *testing.T, _ *rand.Rand, casDir string, s threads.Source, c, _ chain) (string, string) {
		if err := os.Remove(filepath.Join(casDir, c.start+".txt")); err != nil {
			t.Fatal(err)
		}
		return c.head(s), c.start
	}},
	{"head and start both a content node", func(t *testing.T, _ *rand.Rand, _ string, _ threads.Source, c, _ chain) (string, string) {
		return c.prompt, c.prompt
	}},
	{"new thread whose start is missing", func(t *testing.T, rng *rand.Rand, _ string, _ threads.Source, c, _ chain) (string, string) {
		h := flipped(rng, c.start)
		return h, h
	}},
}

// A thread whose line names a head or start that cannot back a status is
// shown as damaged — status "damaged", no steps, its file and line named
// (stderr and exit 1 in the CLI, the damaged field in the API) — by every
// view of it, never with the status it seemed to have; a sound thread
// beside it keeps its status, and a sound root's answers keep their shape.
func TestAThreadWhoseHeadCannotBeTrustedIsShownAsDamagedEverywhere(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, source := range []threads.Source{threads.SourceActive, threads.SourceHistory} {
		for i, d := range lineDamage {
			name := d.name
			if name == "" {
				name = "nothing damaged"
			}
			t.Run(string(source)+"/"+name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				c := newCLI(t)
				l := storage.Layout{Root: c.root}
				store := cas.Open(l.CASDir())
				bundle := ids.HashString("bundle")
				good, bad := putChain(t, store, "good"), putChain(t, store, "bad")
				goodID := ids.NewThreadID(time.UnixMilli(1778000000000))
				badID := ids.NewThreadID(time.UnixMilli(1778000100000))
				head, start := d.spoil(t, rng, l.CASDir(), source, bad, good)
				t.Logf("line names head %s, start %s (sound: %s, %s)", head, start, bad.head(source), bad.start)
				where := writeLines(t, l, bundle, source, threads.Record{ThreadID: goodID, Head: good.head(source), Start: good.start},
					threads.Record{ThreadID: badID, Head: head, Start: start})
				goodStatus := threads.StatusInterrupted
				if source == threads.SourceHistory {
					goodStatus = threads.StatusCompleted
				}
				want := goodStatus
				if d.name != "" {
					want = threads.StatusDamaged
				}
				v := damageView{t: t, c: c, l: l, id: badID, goodID: goodID, good: goodStatus, want: want, where: where}
				v.cliList()
				v.cliShow()
				if d.name != "" {
					v.cliLive()
				}
				srv := httptest.NewServer(api.New(api.Options{Layout: l, LivePoll: 10 * time.Millisecond}))
				defer srv.Close()
				v.apiList(srv.URL)
				v.apiDetail(srv.URL)
				v.apiLive(srv.URL)
				v.events(srv.URL)
			})
		}
	}
}

// writeLines writes recs (thread id, head and start) as the lines of one
// bundle's source, in order, and returns where the last is.
func writeLines(t *testing.T, l storage.Layout, bundle string, source threads.Source, recs ...threads.Record) threads.DamageError {
	t.Helper()
	dir := l.BundleDir(bundle)
	if source == threads.SourceActive {
		for _, r := range recs {
			if err := threads.Upsert(dir, r.ThreadID, threads.Entry{Head: r.Head, Start: r.Start, UpdatedAt: 1778000200000}); err != nil {
				t.Fatal(err)
			}
		}
		return threads.DamageError{Path: threads.IndexFile(dir)}
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, `{"threadId":%q,"head":%q,"start":%q,"completedAt":1778000200000}`+"\n", r.ThreadID, r.Head, r.Start)
	}
	p := threads.HistoryFile(dir, 1778000200000)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return threads.DamageError{Path: p, Line: len(recs)}
}

// damageView checks every view of one root: thread id (whose status
// should be want) beside goodID (whose status is good); where is the
// line that names id.
type damageView struct {
	t          *testing.T
	c          *cli
	l          storage.Layout
	id, goodID string
	good, want threads.Status
	where      threads.DamageError
}

func (v damageView) damaged() bool { return v.want == threads.StatusDamaged }

// place is how the CLI names the line: as threads.DamageError does.
func (v damageView) place() string {
	if v.where.Line == 0 {
		return "damaged " + v.where.Path + ": thread " + v.id + ": "
	}
	return fmt.Sprintf("damaged file %s, line %d: thread %s: ", v.where.Path, v.where.Line, v.id)
}

// wantExit checks a CLI command's exit code and that stderr names the
// line exactly when the thread is damaged (in JSON, checked by the
// caller, with --json).
func (v damageView) wantExit(what string, code int, stderr string) {
	v.t.Helper()
	if v.damaged() {
		place := v.place()
		if strings.Contains(what, "--json") {
			place = `"threadId": "` + v.id + `"`
		}
		if code != 1 || !strings.Contains(stderr, place) {
			v.t.Errorf("%s: exit %d, stderr %q; want exit 1 naming %q", what, code, stderr, place)
		}
		return
	}
	if code != 0 || stderr != "" {
		v.t.Errorf("%s: exit %d, stderr %q; want 0 and nothing", what, code, stderr)
	}
}

func (v damageView) cliList() {
	v.t.Helper()
	out, errs, code := v.c.run("thread", "list", "-o", "table")
	v.wantExit("thread list", code, errs)
	statuses := map[string]threads.Status{v.id: v.want, v.goodID: v.good}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		v.t.Fatalf("thread list:\n%s", out)
	}
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) < 3 || f[2] != string(statuses[f[0]]) {
			v.t.Errorf("thread list line %q, want status %s", line, statuses[f[0]])
		}
	}
	out, errs, code = v.c.run("thread", "list", "--json")
	v.wantExit("thread list --json", code, errs)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		v.t.Fatalf("thread list --json: %v\n%s", err, out)
	}
	for _, r := range rows {
		id, _ := r["threadId"].(string)
		if len(r) != 9 || r["status"] != string(statuses[id]) {
			v.t.Errorf("thread list --json row %v, want status %s", r, statuses[id])
		}
	}
	if !v.damaged() {
		return
	}
	var report struct{ Damaged []threads.DamageError }
	if err := json.Unmarshal([]byte(errs), &report); err != nil || len(report.Damaged) != 1 {
		v.t.Fatalf("thread list --json stderr: %v\n%s", err, errs)
	}
	if d := report.Damaged[0]; d.Path != v.where.Path || d.Line != v.where.Line || d.Thread != v.id || !strings.Contains(d.Reason, "status cannot be known") {
		v.t.Errorf("thread list --json damage = %+v, want %s line %d", d, v.where.Path, v.where.Line)
	}
}

func (v damageView) cliShow() {
	v.t.Helper()
	out, errs, code := v.c.run("thread", "show", v.id)
	v.wantExit("thread show", code, errs)
	var view threadView
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		v.t.Fatalf("thread show: %v\n%s", err, out)
	}
	if view.Status != v.want || v.damaged() != (len(view.Steps) == 0 && view.Result == nil) {
		v.t.Errorf("thread show: status %s, %d steps, result %v; want %s", view.Status, len(view.Steps), view.Result, v.want)
	}
}

func (v damageView) cliLive() {
	v.t.Helper()
	_, errs, code := v.c.run("live", v.id)
	v.wantExit("live", code, errs)
}

// get decodes url's JSON answer into out.
func (v damageView) get(url string, out any) {
	v.t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		v.t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		v.t.Fatalf("GET %s: %v", url, err)
	}
}

// wantDamaged checks the API's damaged field: one entry naming the line
// (relative to the root) when the thread is damaged, absent otherwise.
func (v damageView) wantDamaged(what string, got []api.DamagedFile) {
	v.t.Helper()
	if !v.damaged() {
		if got != nil {
			v.t.Errorf("%s: damaged = %+v on a sound root", what, got)
		}
		return
	}
	rel, _ := filepath.Rel(v.l.Root, v.where.Path)
	if len(got) != 1 || got[0].Path != filepath.ToSlash(rel) || got[0].Line != v.where.Line || got[0].ThreadID != v.id {
		v.t.Errorf("%s: damaged = %+v, want %s line %d of thread %s", what, got, rel, v.where.Line, v.id)
	}
}

func (v damageView) apiList(base string) {
	v.t.Helper()
	var list api.ThreadList
	v.get(base+"/api/threads", &list)
	if len(list.Threads) != 2 {
		v.t.Fatalf("GET /api/threads: %+v", list)
	}
	for _, th := range list.Threads {
		if want := map[string]threads.Status{v.id: v.want, v.goodID: v.good}[th.ThreadID]; th.Status != want {
			v.t.Errorf("GET /api/threads: %s is %s, want %s", th.ThreadID, th.Status, want)
		}
	}
	v.wantDamaged("GET /api/threads", list.Damaged)
	var only api.ThreadList
	v.get(base+"/api/threads?status="+string(v.want), &only)
	if only.Total != 1+map[bool]int{true: 1}[v.want == v.good] {
		v.t.Errorf("GET /api/threads?status=%s: %+v", v.want, only)
	}
}

func (v damageView) apiDetail(base string) {
	v.t.Helper()
	var d struct {
		Records []map[string]any
		Damaged []api.DamagedFile
	}
	v.get(base+"/api/threads/"+v.id, &d)
	if len(d.Records) == 0 || d.Records[0]["status"] != string(v.want) || v.damaged() != (len(d.Records) == 1) {
		v.t.Errorf("GET /api/threads/%s: want status %s: %v", v.id, v.want, d.Records)
	}
	v.wantDamaged("GET /api/threads/:id", d.Damaged)
}

// sse reads url's event stream until stop says so or it ends.
func (v damageView) sse(url string, stop func(fleet.Event) bool) {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	d := fleet.NewDecoder(bufio.NewReader(resp.Body))
	for {
		ev, err := d.Next()
		if err != nil {
			v.t.Fatalf("%s: the stream ended early: %v", url, err)
		}
		if stop(ev) {
			return
		}
	}
}

func (v damageView) apiLive(base string) {
	v.t.Helper()
	var first api.ThreadStartRecord
	var done api.DoneEvent
	v.sse(base+"/api/threads/"+v.id+"/live", func(ev fleet.Event) bool {
		switch {
		case ev.Name == api.EventRecord && first.Type == "":
			if err := json.Unmarshal(ev.Data, &first); err != nil {
				v.t.Fatal(err)
			}
		case ev.Name == api.EventDone:
			if err := json.Unmarshal(ev.Data, &done); err != nil {
				v.t.Fatal(err)
			}
			return true
		}
		return false
	})
	if first.Status != v.want {
		v.t.Errorf("live: first record %+v, want status %s", first, v.want)
	}
	v.wantDamaged("live's first record", first.Damaged)
	wantDone := api.DoneDamaged
	if !v.damaged() {
		wantDone = map[bool]string{true: api.DoneCompleted, false: api.DoneNotRunning}[v.good == threads.StatusCompleted]
	}
	if done.Reason != wantDone {
		v.t.Errorf("live: done %q, want %q", done.Reason, wantDone)
	}
}

func (v damageView) events(base string) {
	v.t.Helper()
	got := map[string]fleet.Thread{}
	v.sse(base+fleet.EventsPath, func(ev fleet.Event) bool {
		if ev.Name == fleet.EventThread {
			var th fleet.Thread
			if err := json.Unmarshal(ev.Data, &th); err != nil {
				v.t.Fatal(err)
			}
			got[th.ID] = th
		}
		return ev.Name == fleet.EventSynced
	})
	if th := got[v.id]; th.Status != string(v.want) || v.damaged() && (th.ReturnCode != nil || th.Steps != 0) {
		v.t.Errorf("events: %+v, want status %s", th, v.want)
	}
	if th := got[v.goodID]; th.Status != string(v.good) {
		v.t.Errorf("events: the sound thread %+v, want status %s", th, v.good)
	}
}
