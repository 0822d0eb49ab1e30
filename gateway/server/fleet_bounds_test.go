package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/testkit"
)

// scrapedSum sums the samples of a metric in a /metrics body whose
// labels contain labels ("" for all).
func scrapedSum(body, name, labels string) float64 {
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(body, -1) {
		if !strings.Contains(m[1], labels) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

// The report: a modified connector sent thread events with 900 KB
// summaries and filled a 64 MB data directory in 15 s. (Here 64 KB, eight
// times the bound: the same cut, at a size a loaded test machine stores
// in seconds rather than minutes.) Through the real
// change stream, every field it sends is fitted to the store's bounds,
// threads it cannot name are refused, its machine keeps to its share,
// and each of these is counted and told in a few log lines.
func TestAModifiedConnectorCannotFillTheStore(t *testing.T) {
	t.Parallel()
	const maxThreads = 8
	st, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir(), MaxThreadsPerMachine: maxThreads, MaxBytesPerMachine: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the gateway's own cleanup
	var logs testkit.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	f := newFixture(t, time.Hour, func(o *Options) {
		o.Store, o.Logger = st, logger
		o.limited = logging.NewLimited(logger.Handler(), logging.LimitOptions{Burst: untrustedBurst, Interval: time.Hour})
	})
	now := time.Now()
	var threads []fleet.Thread
	const sent = 24
	for i := range sent {
		rc := math.MaxInt32 + 5
		threads = append(threads, fleet.Thread{
			ID: fmt.Sprintf("t%03d", i), Workflow: strings.Repeat("w", 10<<10), Status: "status with spaces",
			Prompt: strings.Repeat("p", 100<<10), Summary: strings.Repeat("s", 8*store.MaxSummaryBytes),
			StartedAt: now.Add(-time.Minute), UpdatedAt: now.Add(time.Duration(i) * time.Second), DurationMs: math.MaxInt64,
			Steps: -3, ReturnCode: &rc, Usage: []byte(`{"models":["` + strings.Repeat("m", 8<<10) + `"]}`), Tokens: -1, Cost: 1e300, // JSON has no infinity
		})
	}
	badIDs := []string{"", "a/b", strings.Repeat("x", 200), "t\u00e9"}
	for _, id := range badIDs {
		threads = append(threads, fleet.Thread{ID: id, UpdatedAt: now})
	}
	f.connector("mallory", newFakeConnector(threads...))

	var metrics string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s\nits metrics when last read:\n%s", logs.String(), metrics)
		}
	})
	testkit.WaitUntil(t, "every thread event to be stored or refused", func() bool {
		_, metrics = f.do("GET", "/metrics", "", nil)
		// At least: a batch the store could not take in time is sent
		// again (the stream resumes from the last stored event), and
		// counted again.
		return scrapedSum(metrics, "uncaged_gateway_fleet_fields_cut_total", `field="summary"`) >= sent &&
			scrapedSum(metrics, "uncaged_gateway_fleet_threads_refused_total", `reason="bad id"`) >= float64(len(badIDs))
	})
	if evicted := scrapedSum(metrics, "uncaged_gateway_fleet_threads_evicted_total", ""); evicted < sent-maxThreads {
		t.Fatalf("%v threads evicted of %d sent, share %d", evicted, sent, maxThreads)
	}
	for _, field := range []string{"workflow", "status", "prompt", "usage", "tokens", "cost", "steps", "duration", "returnCode"} {
		if scrapedSum(metrics, "uncaged_gateway_fleet_fields_cut_total", `field="`+field+`"`) < sent {
			t.Errorf("field %s: not counted for every thread", field)
		}
	}
	page := f.search("machine=mallory&limit=1000")
	if len(page.Threads) > maxThreads || len(page.Threads) == 0 {
		t.Fatalf("%d threads kept, share %d", len(page.Threads), maxThreads)
	}
	for _, th := range page.Threads {
		if len(th.Summary) > store.MaxSummaryBytes || len(*th.Workflow) > store.MaxWorkflowBytes || th.Status != store.UnknownStatus ||
			th.Usage != nil || th.Tokens != 0 || th.Cost != 0 || th.Steps != 0 || th.ReturnCode != nil ||
			th.DurationMs != store.MaxDuration.Milliseconds() || !strings.HasSuffix(th.Prompt, store.CutMark) {
			t.Fatalf("a thread stored: %.300v", th)
		}
	}
	// The newest are the ones kept.
	if page.Threads[0].ThreadID != fmt.Sprintf("t%03d", sent-1) {
		t.Fatalf("the newest thread kept is %s", page.Threads[0].ThreadID)
	}
	lines := logLines(t, &logs)
	for _, msg := range []string{"fleet: threads refused", "fleet: fields cut or corrected to fit the store's bounds", "fleet: machine over its share of the store: its oldest threads forgotten"} {
		if lines[msg] == 0 || lines[msg] > untrustedBurst {
			t.Errorf("%q: %d lines", msg, lines[msg])
		}
	}
}

// An event id not of the stream's form — here a megabyte long — is not
// kept to be sent back as Last-Event-ID; the threads it came with are.
func TestAnEventIDOutOfFormIsNotKept(t *testing.T) {
	t.Parallel()
	f, st := newFleetFixture(t)
	huge := strings.Repeat("i", fleet.MaxEventSize-100)
	var mu sync.Mutex
	var asked []string
	f.connector("mallory", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != fleet.EventsPath {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		asked = append(asked, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		data, _ := json.Marshal(fleet.Thread{ID: "t1", Status: "running", UpdatedAt: time.Now()})
		for _, ev := range []fleet.Event{{ID: huge, Name: fleet.EventReset, Data: []byte(`{}`)}, {ID: huge, Name: fleet.EventThread, Data: data}, {ID: huge, Name: fleet.EventSynced, Data: []byte(`{}`)}} {
			_, _ = w.Write(fleet.AppendEvent(nil, ev))
		}
		// The stream ends: the gateway reads it again, from the last id it kept.
	}))
	testkit.WaitUntil(t, "the stream to be read again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range asked {
		if id != "" {
			t.Fatalf("the gateway sent back an id of %d bytes", len(id))
		}
	}
	if _, err := st.GetThread(context.Background(), "mallory", "t1"); err != nil {
		t.Fatalf("the thread: %v", err)
	}
}
