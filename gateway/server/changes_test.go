package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// changeEvents opens GET /api/gateway/changes and returns its events as
// they come, the hello first; the stream closes with the test.
func (f *fixture) changeEvents() <-chan fleet.Event {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/api/gateway/changes", nil)
	req.Header.Set("Authorization", "Bearer "+f.dash)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		f.t.Fatalf("changes: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan fleet.Event, 64)
	go func() {
		defer close(out)
		d := fleet.NewDecoder(resp.Body)
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			out <- ev
		}
	}()
	f.t.Cleanup(func() { cancel(); resp.Body.Close() })
	return out
}

// nextChange waits for the next event named name whose data holds want
// (ignoring others), and fails the test when the stream ends first.
func nextChange(t *testing.T, evs <-chan fleet.Event, name, want string) fleet.Event {
	t.Helper()
	timeout := time.After(testkit.WaitBound)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("the change stream ended before %s %s", name, want)
			}
			if ev.Name == name && strings.Contains(string(ev.Data), want) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event holding %s", name, want)
		}
	}
}

// TestChangesTellTheDashboardWhatMoved: the change stream says which topics
// it pushes, then hints at each kind of change through the path it takes
// in production: a connector coming and going (presence), the fleet's
// memory syncing a machine's threads (gathered, announced through the
// store), a trigger made and paused and its runs moving (the store's
// notifications).
func TestChangesTellTheDashboardWhatMoved(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t, nil, nil)
	evs := f.changeEvents()
	hello := nextChange(t, evs, "hello", "")
	var h struct{ Topics []string }
	if err := json.Unmarshal(hello.Data, &h); err != nil || !slices.Equal(h.Topics, []string{topicMachines, topicThreads, topicTriggers}) {
		t.Fatalf("hello: %s", hello.Data)
	}

	stop := f.connector("laptop", echoAPI("laptop"))
	nextChange(t, evs, topicMachines, "{}")
	stop()
	f.waitStatus("laptop", "offline")
	nextChange(t, evs, topicMachines, "{}")

	f.gw.threadHints.synced("build-box")
	f.gw.threadHints.synced("laptop")
	nextChange(t, evs, topicThreads, `"machine":"build-box"`)
	nextChange(t, evs, topicThreads, `"machine":"laptop"`)

	id, _, _ := f.create(`{"machine":"laptop","workflow":"review","webhook":true,"prompt":"p"}`)
	nextChange(t, evs, topicTriggers, id)
	if resp, body := f.do("POST", "/api/gateway/triggers/"+id+"/pause", f.dash, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	nextChange(t, evs, topicTriggers, id)
}

// TestChangesNeedTheDashboard: the stream is the dashboard's; without a
// store it pushes the machines alone (the views of the fleet's memory
// keep polling), and it ends, whole, when the gateway stops.
func TestChangesNeedTheDashboard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	if resp, _ := f.do("GET", "/api/gateway/changes", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d", resp.StatusCode)
	}
	connectorTok, _ := f.auth.Issue(auth.RoleConnector, "laptop", time.Hour)
	if resp, _ := f.do("GET", "/api/gateway/changes", connectorTok, nil); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("with a connector's token: %d", resp.StatusCode)
	}
	evs := f.changeEvents()
	hello := nextChange(t, evs, "hello", "")
	if string(hello.Data) != `{"topics":["machines"]}` {
		t.Fatalf("hello without a store: %s", hello.Data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	if open := f.gw.streams.End(ctx); open != 0 {
		t.Fatalf("%d streams still open after the gateway's streams ended", open)
	}
	for ev := range evs {
		t.Fatalf("an event after the stop: %+v", ev)
	}
}

// TestChangeHintsAreCoalesced: a hint after a quiet spell goes at once;
// what comes within changesCoalesce of a batch waits for the next batch,
// each hint once however often it came; the threads of more machines than
// maxThreadHints go as one hint naming none; a reload hints at every topic.
func TestChangeHintsAreCoalesced(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	res := echo.NewResponse(rec, echo.New())
	st := &changeStream{res: res, pending: map[changeHint]struct{}{}}
	t0 := time.Unix(1800000000, 0)
	sent := func() string {
		s := rec.Body.String()
		rec.Body.Reset()
		return s
	}
	st.addStored(store.Change{Kind: store.ChangeThreads, IDs: []string{"laptop", "box"}})
	if wait := st.send(t0); wait != 0 {
		t.Fatalf("wait %v after a quiet spell", wait)
	}
	if got := sent(); got != "event: threads\ndata: {\"machine\":\"box\"}\n\nevent: threads\ndata: {\"machine\":\"laptop\"}\n\n" {
		t.Fatalf("first batch: %q", got)
	}
	for i := range 50 {
		st.add(topicThreads, "laptop")
		st.add(topicMachines, "")
		at := time.Duration(i) * time.Millisecond
		if wait := st.send(t0.Add(at)); wait != changesCoalesce-at {
			t.Fatalf("burst %d: wait %v", i, wait)
		}
	}
	if got := sent(); got != "" {
		t.Fatalf("sent within the window: %q", got)
	}
	if wait := st.send(t0.Add(changesCoalesce)); wait != 0 {
		t.Fatalf("wait %v after the window", wait)
	}
	if got := sent(); got != "event: machines\ndata: {}\n\nevent: threads\ndata: {\"machine\":\"laptop\"}\n\n" {
		t.Fatalf("the burst as one batch, each hint once: %q", got)
	}
	if wait := st.send(t0.Add(time.Hour)); wait != 0 || sent() != "" {
		t.Fatal("an empty batch was sent")
	}

	for _, n := range []int{maxThreadHints, maxThreadHints + 1, 1000} {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("m%04d", i))
		}
		st.addStored(store.Change{Kind: store.ChangeThreads, IDs: ids})
		st.addStored(store.Change{Kind: store.ChangeTrigger, IDs: []string{"trg_a"}})
		st.send(t0.Add(time.Duration(n) * time.Hour))
		got := sent()
		named, anyMachine := strings.Count(got, `"machine"`), strings.Count(got, "event: threads\ndata: {}\n")
		if n <= maxThreadHints && (named != n || anyMachine != 0) || n > maxThreadHints && (named != 0 || anyMachine != 1) {
			t.Fatalf("%d machines: %d named, %d for any machine", n, named, anyMachine)
		}
		if !strings.Contains(got, "event: triggers\ndata: {\"trigger\":\"trg_a\"}\n") {
			t.Fatalf("%d machines: the trigger's hint is lost: %q", n, got)
		}
	}

	st.addStored(store.Change{Kind: store.ChangeReload})
	st.send(t0.Add(2000 * time.Hour))
	if got := sent(); got != "event: machines\ndata: {}\n\nevent: threads\ndata: {}\n\nevent: triggers\ndata: {}\n\n" {
		t.Fatalf("a reload hints at everything: %q", got)
	}
}
