package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/usage"
)

// POST …/fork {"step": n} forks at the n-th role step: the fork shares
// the original's first n steps and runs on from there.
func TestForkAtStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "fork me at a step")
	orig := f.waitStatus(id, "completed")

	var ref struct{ ThreadID string }
	// Step 1, not what a fork without a step does (all but the last step).
	f.want(http.MethodPost, "/api/threads/"+id+"/fork", `{"step":1}`, http.StatusCreated, &ref)
	d := f.waitStatus(ref.ThreadID, "completed")
	if got := strings.Join(d.roles(), ","); got != "planner,coder,reviewer" {
		t.Errorf("fork roles: %s", got)
	}
	// Record 1 is the replayed step (record 0 is the start); 2 ran again.
	if d.Records[1]["stateHash"] != orig.Records[1]["stateHash"] {
		t.Errorf("step 1 not replayed: %v, the original's %v", d.Records[1]["stateHash"], orig.Records[1]["stateHash"])
	}
	if d.Records[2]["stateHash"] == orig.Records[2]["stateHash"] {
		t.Errorf("step 2 was replayed, not run again")
	}
	f.want(http.MethodPost, "/api/threads/"+id+"/fork", `{"step":null}`, http.StatusCreated, &ref)
	f.waitStatus(ref.ThreadID, "completed")

	var before ThreadList
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &before)
	for body, msg := range map[string]string{
		`{"step":0}`:                      "step must be a whole number from 1: 0",
		`{"step":-2}`:                     "step must be a whole number from 1: -2",
		`{"step":1.5}`:                    "step must be a whole number from 1: 1.5",
		`{"step":"2"}`:                    "step must be a number",
		`{"step":99}`:                     "step 99 not in thread: it has steps 1 to 3",
		`{"step":1e400}`:                  "step must be a whole number from 1",
		`{"step":2,"fromRole":"planner"}`: "fork at a step or from a role, not both",
	} {
		f.wantError(http.MethodPost, "/api/threads/"+id+"/fork", body, http.StatusBadRequest, msg)
	}
	var after ThreadList
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &after)
	if after.Total != before.Total {
		t.Errorf("refused forks started threads: %d, was %d", after.Total, before.Total)
	}
}

// GET /api/bundles/:hash shows what a thread's bundle link names: its
// source, descriptor and workflows.
func TestBundle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.register("also-linear", "linear.esm.js")
	var b BundleDetail
	f.want(http.MethodGet, "/api/bundles/"+hash, "", http.StatusOK, &b)
	src, err := os.ReadFile(f.l.BundleFile(hash))
	if err != nil {
		t.Fatal(err)
	}
	if b.Hash != hash || b.Kind != "js" || b.Source != string(src) || b.Truncated || b.Size != int64(len(src)) {
		t.Errorf("bundle: %+v", b)
	}
	if b.Descriptor == nil || len(b.Descriptor.Roles) == 0 {
		t.Errorf("bundle descriptor: %+v", b.Descriptor)
	}
	if got, _ := json.Marshal(b.Workflows); string(got) != `[{"name":"also-linear","current":true},{"name":"linear","current":true}]` {
		t.Errorf("bundle workflows: %s", got)
	}

	f.wantError(http.MethodGet, "/api/bundles/0000000000000", "", http.StatusNotFound, "bundle not found: 0000000000000")
	f.wantError(http.MethodGet, "/api/bundles/not-a-hash", "", http.StatusBadRequest, "")
	f.wantError(http.MethodGet, "/api/bundles/..%2Fworkflow.yaml", "", http.StatusBadRequest, "")
}

// A big bundle's source is cut at maxBundleSource, and says so.
func TestBundleTruncated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := "B1GBVNDE00000"
	big := strings.Repeat("x", maxBundleSource+10)
	if err := os.MkdirAll(f.l.BundlesDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.l.BundleFile(hash), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	var b BundleDetail
	f.want(http.MethodGet, "/api/bundles/"+hash, "", http.StatusOK, &b)
	if b.Kind != "js" || !b.Truncated || len(b.Source) != maxBundleSource || b.Size != int64(len(big)) || b.Descriptor != nil || len(b.Workflows) != 0 {
		t.Errorf("big bundle: kind %s truncated %v len %d size %d", b.Kind, b.Truncated, len(b.Source), b.Size)
	}
}

// While a thread runs, the live stream sends its thread-start record again
// (event start) as its head moves, so the head a client shows follows the
// steps instead of staying at the start. The thread's steps wait at gate
// files (testdata drafts.esm.js), so the stream is open before they run.
func TestLiveStartFollowsTheHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("drafts", "drafts.esm.js")
	f.startHost()
	gate := filepath.Join(t.TempDir(), "gate")
	open := func(step int) {
		if err := os.WriteFile(fmt.Sprintf("%s.%d", gate, step), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := f.run("drafts", "gate:"+gate)
	resp := f.openLive(context.Background(), id)
	defer resp.Body.Close()
	r := newSSEReader(resp.Body)
	next := func() (sseEvent, ThreadStartRecord) {
		t.Helper()
		ev, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		var st ThreadStartRecord
		if ev.Name == EventStart || strings.Contains(ev.Data, `"type":"thread-start"`) {
			if err := json.Unmarshal([]byte(ev.Data), &st); err != nil {
				t.Fatal(err)
			}
		}
		return ev, st
	}
	ev, first := next()
	if ev.Name != EventRecord || first.Type != RecordThreadStart || first.Head != first.Start {
		t.Fatalf("first event: %+v", ev)
	}

	// Step 1 is written: a start event brings its head, then its record.
	open(1)
	ev, moved := next()
	for ev.Name == EventInfo {
		ev, moved = next()
	}
	if ev.Name != EventStart || moved.Head == first.Head || moved.Status != "running" || moved.ThreadID != id || posOf(t, ev.ID).records != 1 {
		t.Fatalf("after step 1: %+v", ev)
	}
	ev, _ = next()
	for ev.Name == EventInfo {
		ev, _ = next()
	}
	var step1 RoleRecord
	if ev.Name != EventRecord || json.Unmarshal([]byte(ev.Data), &step1) != nil || step1.StateHash != moved.Head {
		t.Fatalf("step 1's record %+v, the start event's head %s", ev, moved.Head)
	}

	// To the end: the last start event has the final head and status.
	for k := 2; k <= 4; k++ {
		open(k)
	}
	evs := collect(t, r)
	var last ThreadStartRecord
	for _, ev := range evs {
		if ev.Name == EventStart {
			if err := json.Unmarshal([]byte(ev.Data), &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	final := f.detail(id).Records[0]
	if last.Head != final["head"] || last.Status != "completed" {
		t.Errorf("last start event: head %s status %s, the thread's head %v", last.Head, last.Status, final["head"])
	}
}

// The live stream's step records carry their model usage, as
// GET /api/threads/:id's do, so a page that follows the stream shows it.
func TestLiveStepsCarryUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "count me")
	f.waitStatus(id, "completed")
	appendUsage(t, usage.Path(f.l, hash, id),
		usage.Record{Time: 1, Thread: id, Step: 1, Source: usage.SourceRole, Model: "p/m", PromptTokens: 30, CompletionTokens: 12},
		usage.Record{Time: 2, Thread: id, Step: 4, Source: usage.SourceSummarizer, Model: "p/m", PromptTokens: 7})
	resp := f.openLive(context.Background(), id)
	defer resp.Body.Close()
	var got []*usage.Totals
	for _, ev := range collect(t, newSSEReader(resp.Body)) {
		var r struct {
			Type  string        `json:"type"`
			Usage *usage.Totals `json:"usage"`
		}
		if ev.Name != EventRecord || json.Unmarshal([]byte(ev.Data), &r) != nil || r.Type == RecordThreadStart {
			continue
		}
		got = append(got, r.Usage)
	}
	if len(got) != 4 || got[0] == nil || got[0].TotalTokens != 42 || got[1] != nil || got[2] != nil || got[3] == nil || got[3].PromptTokens != 7 {
		t.Fatalf("usage of the streamed steps and result: %+v", got)
	}
}
