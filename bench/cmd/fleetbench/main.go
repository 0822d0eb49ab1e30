// Command fleetbench measures the gateway's fleet memory at the issue's
// scale target: 1,000 machines × 1,000 threads, kept in SQLite or, with
// -database-url, in PostgreSQL. It builds and runs the real gateway binary
// on a data directory of its own, and prints, each beside a baseline
// measured in the same run:
//
//   - search latency (p50, p95) of typical queries — words common, rare
//     and absent, two words, machine+status, workflow, workflow+since, the
//     newest page — directly against the store, beside a point lookup of
//     one thread (GetThread), and through the gateway's HTTP search
//     handler, beside an authenticated trivial request (GET
//     /api/gateway/endpoints);
//   - for the searches with words, the store's first plan (filter every
//     match, sort them all), which legacy.go keeps for this comparison
//     only, on the same history: p50 before and after, and a check that
//     both give the same page and total;
//   - the gateway's CPU for one connector's resync of 1,000 threads over
//     its change stream (first sync, all changed, none changed), beside
//     this process writing the same threads with SyncThreads directly;
//   - the gateway's resident memory with an empty history and again after
//     the history has grown to the full size and been searched.
//
// The history is written straight into the gateway's database (SQLite
// allows other processes beside the gateway), as a thousand connectors'
// resyncs would leave it; one connector's resync goes through the gateway.
// A history an earlier run left (same -dir, or same -database-url) is
// reused: filling a million threads takes minutes.
//
// The machine's load average is printed at the start and the end: on a
// shared machine, compare figures of one run, not across runs.
//
// Usage: go run ./bench/cmd/fleetbench [-machines 1000] [-threads 1000] [-dir DIR] [-database-url URL]
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/uncaged/workflow/bench/loadgen"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

func main() {
	machines := flag.Int("machines", 1000, "machines in the history")
	perMachine := flag.Int("threads", 1000, "threads per machine")
	iterations := flag.Int("n", 60, "runs of each search query")
	resyncs := flag.Int("resyncs", 5, "runs of each resync figure; the median is reported")
	src := flag.String("src", ".", "source tree to build the gateway from")
	dir := flag.String("dir", "", "work directory (default: a temporary one, removed afterwards); a history an earlier run left there is reused")
	databaseURL := flag.String("database-url", "", "measure PostgreSQL at this URL (an empty database, or one an earlier run filled) instead of SQLite")
	flag.Parse()
	// Nothing it starts reads or writes the home of whoever runs it.
	defer testkit.PrivateHomeFor("fleetbench")()

	work := *dir
	if work == "" {
		var err error
		work, err = os.MkdirTemp("", "fleetbench-")
		check(err)
		defer func() { check(os.RemoveAll(work)) }()
	}
	backend := "SQLite"
	if *databaseURL != "" {
		backend = "PostgreSQL"
	}
	fmt.Printf("fleetbench: %d CPUs, %s, %s, %d machines × %d threads, work dir %s\n", runtime.NumCPU(), runtime.Version(), backend, *machines, *perMachine, work)
	fmt.Printf("load average at start: %s\n\n", loadAverage())

	gwBin := filepath.Join(work, "uncaged-gateway")
	build := exec.Command("go", "build", "-o", gwBin, "./gateway/cmd/uncaged-gateway")
	build.Dir, build.Stderr = *src, os.Stderr
	check(build.Run())
	dataDir := filepath.Join(work, "gateway")
	key := strings.TrimSpace(output(gwBin, nil, "key", "generate"))
	env := []string{"UNCAGED_GATEWAY_KEY=" + key, "UNCAGED_GATEWAY_DATA_DIR=" + dataDir, "UNCAGED_GATEWAY_LOG_FORMAT=json"}
	if *databaseURL != "" {
		env = append(env, "UNCAGED_GATEWAY_DATABASE_URL="+*databaseURL)
	}
	// The first command to open the store migrates a reused history's
	// schema, if it is older.
	t0 := time.Now()
	dash := strings.TrimSpace(output(gwBin, env, "token", "create", "--dashboard", "--note", "fleetbench"))
	fmt.Printf("store opened (and migrated if need be) by token create in %s\n", time.Since(t0).Round(100*time.Millisecond))

	gw, addr := startGateway(gwBin, env)
	defer stop(gw)
	c := &client{base: "http://" + addr, token: dash}
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{DataDir: dataDir, DatabaseURL: *databaseURL})
	check(err)
	defer func() { check(st.Close()) }()
	old, err := openLegacy(dataDir, *databaseURL)
	check(err)
	defer func() { check(old.db.Close()) }()

	// Memory with an empty history, after the same kinds of requests the
	// full history gets later.
	for range 20 {
		c.get("/api/gateway/threads?q=deploy")
		c.get("/api/gateway/machines")
	}
	rssEmpty := rss(gw.Process.Pid)

	gen := newGenerator(1)
	total := *machines * *perMachine
	if filled(ctx, st, gen, *machines, *perMachine) {
		fmt.Printf("the history of an earlier run is there: %d machines × %d threads; database %s\n\n", *machines, *perMachine, dbSize(ctx, dataDir, *databaseURL))
		gen.now = newest(ctx, st)
	} else {
		fmt.Printf("filling the history: %d machines × %d threads\n", *machines, *perMachine)
		t0 := time.Now()
		for m := range *machines {
			name := gen.machineName(m)
			threads := gen.threads(*perMachine, 0)
			for i := 0; i < len(threads); i += 500 {
				check(st.SyncThreads(ctx, name, threads[i:min(i+500, len(threads))]))
			}
			if (m+1)%100 == 0 {
				fmt.Printf("  %d machines, %s\n", m+1, time.Since(t0).Round(time.Second))
			}
		}
		fill := time.Since(t0)
		fmt.Printf("  %d threads in %s (%.0f threads/s); database %s\n\n", total, fill.Round(time.Second), float64(total)/fill.Seconds(), dbSize(ctx, dataDir, *databaseURL))
	}

	queries := typicalQueries(gen, *machines)
	searchDirect(ctx, st, old, backend, queries, *iterations)
	searchHTTP(c, queries, *iterations)
	rssSearched := rss(gw.Process.Pid)
	resync(ctx, gw.Process.Pid, addr, st, *perMachine, *resyncs)

	rssFull := rss(gw.Process.Pid)
	fmt.Println("gateway memory")
	fmt.Printf("  RSS with an empty history             %6.1f MB\n", mb(rssEmpty))
	fmt.Printf("  with %7d threads, after the searches %6.1f MB (%+.1f MB; target: no growth with history)\n", total, mb(rssSearched), mb(rssSearched-rssEmpty))
	fmt.Printf("  and after the resyncs                 %6.1f MB (%+.1f MB)\n", mb(rssFull), mb(rssFull-rssEmpty))
	fmt.Printf("\nload average at the end: %s\n", loadAverage())
}

// filled reports whether an earlier run left the full history: its first
// and last machines hold every thread.
func filled(ctx context.Context, st store.Store, g *generator, machines, perMachine int) bool {
	for _, m := range []int{0, machines - 1} {
		p, err := st.SearchThreads(ctx, store.ThreadQuery{Machine: g.machineName(m), Limit: 1})
		check(err)
		if p.Total != perMachine {
			return false
		}
	}
	return true
}

// newest is the time of the newest thread of the history, which the
// generator's times were drawn back from.
func newest(ctx context.Context, st store.Store) time.Time {
	p, err := st.SearchThreads(ctx, store.ThreadQuery{Limit: 1})
	check(err)
	if len(p.Threads) == 0 {
		return time.Now()
	}
	return p.Threads[0].UpdatedAt
}

// loadAverage is the machine's load, which the figures depend on: the
// machine may be shared.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ") + fmt.Sprintf(" (%d CPUs)", runtime.NumCPU())
}

// --- the history ---------------------------------------------------------

// generator makes a realistic fleet: host-like machine names, a dozen
// workflows, prompts and summaries written from a vocabulary with a
// Zipf-like word frequency (a few words are everywhere, most are rare),
// statuses in the proportions a working fleet shows, and times over the
// last 60 days (inside the default 90-day retention).
type generator struct {
	rng  *rand.Rand
	zipf *rand.Zipf
	now  time.Time
}

var workflows = []string{
	"plan-code-review", "hello-world", "triage-issue", "fix-flaky-test", "write-docs", "release-notes",
	"dependency-bump", "security-audit", "refactor", "data-migration", "incident-report", "translate",
}

// vocabulary, most frequent first.
var vocabulary = strings.Fields(`
	the service test build deploy review fix update api database user error config release
	payments checkout search cache timeout retry queue worker migration schema index logging
	metrics dashboard auth token session login billing invoice customer order inventory
	shipping notification email webhook scheduler cron backup restore replica cluster node
	kubernetes docker image registry pipeline runner flaky integration unit coverage lint
	typescript golang python rust frontend backend mobile android ios accessibility
	localization translation spanish german japanese documentation readme changelog
	performance latency throughput memory leak goroutine deadlock race condition panic
	regression rollback hotfix incident postmortem outage alert pager oncall runbook
	security vulnerability cve dependency upgrade license audit secret rotation encryption
	tls certificate dns proxy nginx caddy gateway tunnel websocket grpc protobuf graphql
	rate limiter quota tenant organization permission role admin onboarding signup
	analytics event tracking experiment feature flag rollout canary staging production
	terraform helm chart manifest secretstore vault kafka redis postgres sqlite mongodb
	elasticsearch opensearch bigquery snowflake etl warehouse report export import csv
	pdf upload download storage bucket s3 gcs azure lambda function serverless edge
	flux capacitor widget gizmo sprocket frobnicator quux zanzibar heliotrope marmalade`)

func newGenerator(seed int64) *generator {
	rng := rand.New(rand.NewSource(seed))
	return &generator{rng: rng, zipf: rand.NewZipf(rng, 1.1, 4, uint64(len(vocabulary)-1)), now: time.Now()}
}

func (g *generator) word() string { return vocabulary[g.zipf.Uint64()] }

func (g *generator) machineName(i int) string {
	kinds := []string{"laptop", "ci-runner", "gpu", "build", "dev-box", "staging"}
	return fmt.Sprintf("%s-%04d", kinds[i%len(kinds)], i)
}

var verbs = []string{"Fix", "Add", "Refactor", "Review", "Investigate", "Update", "Document", "Migrate", "Speed up", "Remove", "Write tests for", "Upgrade"}

// sentence is one instruction or finding. One in three names something
// nearly unique, as real prompts do (an issue number, a file), so that a
// search for it finds a handful of threads among a million.
func (g *generator) sentence() string {
	n := 4 + g.rng.Intn(10)
	words := make([]string, n)
	for i := range words {
		words[i] = g.word()
	}
	switch g.rng.Intn(6) {
	case 0:
		words = append(words, fmt.Sprintf("(issue %d)", g.rng.Intn(100000)))
	case 1:
		words = append(words, fmt.Sprintf("in %s_%d.go", g.word(), g.rng.Intn(5000)))
	}
	return verbs[g.rng.Intn(len(verbs))] + " " + strings.Join(words, " ") + "."
}

func (g *generator) text(minS, maxS int) string {
	n := minS + g.rng.Intn(maxS-minS+1)
	s := make([]string, n)
	for i := range s {
		s[i] = g.sentence()
	}
	return strings.Join(s, " ")
}

var statuses = []struct {
	name   string
	weight int
}{{"completed", 70}, {"failed", 12}, {"killed", 5}, {"interrupted", 3}, {"running", 7}, {"paused", 3}}

func (g *generator) status() string {
	n := g.rng.Intn(100)
	for _, s := range statuses {
		if n < s.weight {
			return s.name
		}
		n -= s.weight
	}
	return "completed"
}

// threads makes n threads of one machine; tag, when not 0, is put in
// every summary, so a resync with another tag changes every row.
func (g *generator) threads(n, tag int) []store.Thread {
	out := make([]store.Thread, n)
	for i := range out {
		updated := g.now.Add(-time.Duration(g.rng.Int63n(int64(60 * 24 * time.Hour))))
		dur := time.Duration(g.rng.ExpFloat64() * float64(10*time.Minute))
		started := updated.Add(-dur)
		st := g.status()
		t := store.Thread{
			ID:       fmt.Sprintf("01J%023d", g.rng.Int63()),
			Workflow: workflows[g.rng.Intn(len(workflows))], Status: st,
			Prompt:    g.text(1, 6),
			StartedAt: &started, UpdatedAt: updated, Duration: dur, Steps: 1 + g.rng.Intn(40),
		}
		if st != "running" && st != "paused" && st != "interrupted" {
			rc := 0
			switch st {
			case "failed":
				rc = 1
			case "killed":
				rc = 130
			}
			t.ReturnCode = &rc
			t.Summary = st + ": " + g.text(1, 3)
			if tag != 0 {
				t.Summary += fmt.Sprintf(" run%d", tag)
			}
		}
		if g.rng.Intn(10) < 6 {
			t.Usage = json.RawMessage(fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"cost_usd":%.4f}`, 1000+g.rng.Intn(90000), 100+g.rng.Intn(8000), g.rng.Float64()))
		}
		out[i] = t
	}
	return out
}

// --- search ----------------------------------------------------------------

type query struct {
	name string
	q    store.ThreadQuery
}

func typicalQueries(g *generator, machines int) []query {
	m := g.machineName(machines / 2)
	return []query{
		{"newest page", store.ThreadQuery{}},
		{"q: common word (deploy)", store.ThreadQuery{Q: "deploy"}},
		{"q: rare word (marmalade)", store.ThreadQuery{Q: "marmalade"}},
		{"q: an issue number", store.ThreadQuery{Q: "issue 4242"}},
		{"q: two words", store.ThreadQuery{Q: "payments timeout"}},
		{"machine + status", store.ThreadQuery{Machine: m, Status: "failed"}},
		{"workflow", store.ThreadQuery{Workflow: "security-audit"}},
		{"workflow + since 7 days", store.ThreadQuery{Workflow: "triage-issue", Since: g.now.Add(-7 * 24 * time.Hour)}},
		{"q + machine", store.ThreadQuery{Q: "cache", Machine: m}},
		{"q: commonest word (the)", store.ThreadQuery{Q: "the"}},
		{"q: no match (xylophone)", store.ThreadQuery{Q: "xylophone"}},
		{"q: common word, page 4", store.ThreadQuery{Q: "deploy", Offset: 150}},
		{"q + status", store.ThreadQuery{Q: "review", Status: "failed"}},
	}
}

// values is the query string of q.
func (q query) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("machine", q.q.Machine)
	set("workflow", q.q.Workflow)
	set("status", q.q.Status)
	set("q", q.q.Q)
	if !q.q.Since.IsZero() {
		v.Set("since", q.q.Since.UTC().Format(time.RFC3339))
	}
	return v
}

func percentiles(d []time.Duration) (p50, p95 time.Duration) {
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*95/100]
}

func timeIt(n int, fn func()) (p50, p95 time.Duration) {
	fn() // warm up
	d := make([]time.Duration, n)
	for i := range d {
		t0 := time.Now()
		fn()
		d[i] = time.Since(t0)
	}
	return percentiles(d)
}

// timeWithin is timeIt's p50 for what may be very slow (the first plan
// on PostgreSQL walks the whole table for a word found nowhere): after
// the warm-up run, it runs fn at most n times and, past the first, only
// while the runs fit in budget.
func timeWithin(n int, budget time.Duration, fn func()) time.Duration {
	t0 := time.Now()
	fn()
	runs := min(n, max(1, int(budget/max(time.Since(t0), time.Millisecond))))
	d := make([]time.Duration, runs)
	for i := range d {
		t0 := time.Now()
		fn()
		d[i] = time.Since(t0)
	}
	p50, _ := percentiles(d)
	return p50
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func searchDirect(ctx context.Context, st store.Store, old *legacy, backend string, queries []query, n int) {
	fmt.Printf("search, directly against the store (%s)\n", backend)
	page, err := st.SearchThreads(ctx, store.ThreadQuery{Limit: 1})
	check(err)
	one := page.Threads[0]
	b50, b95 := timeIt(n, func() {
		_, err := st.GetThread(ctx, one.Machine, one.ID)
		check(err)
	})
	fmt.Printf("  %-28s p50 %7.2f ms  p95 %7.2f ms   (baseline)\n", "GetThread (point lookup)", ms(b50), ms(b95))
	type textRun struct {
		name             string
		before, after    time.Duration
		matches          int
		capped, sameRows bool
	}
	var text []textRun
	for _, q := range queries {
		var total int
		var capped bool
		p50, p95 := timeIt(n, func() {
			page, err := st.SearchThreads(ctx, q.q)
			check(err)
			total, capped = page.Total, page.TotalCapped
		})
		fmt.Printf("  %-28s p50 %7.2f ms  p95 %7.2f ms   %6d matches%s   p50 %5.1fx baseline   (target p50 <= 50 ms)\n", q.name, ms(p50), ms(p95), total, plus(capped), ms(p50)/ms(b50))
		if q.q.Q == "" {
			continue
		}
		// The first plan, on the same history, in the same run; and the
		// same answer from both.
		var keys []string
		var oldTotal int
		o50 := timeWithin(max(n/4, 3), 20*time.Second, func() {
			var err error
			keys, oldTotal, err = old.search(ctx, q.q)
			check(err)
		})
		page, err := st.SearchThreads(ctx, q.q)
		check(err)
		var got []string
		for _, t := range page.Threads {
			got = append(got, t.Machine+"/"+t.ID)
		}
		text = append(text, textRun{q.name, o50, p50, total, capped, slices.Equal(keys, got) && oldTotal == page.Total})
	}
	if len(text) > 0 {
		fmt.Printf("\n  full-text search, the first plan (sort every match) against the current one, same run (p50):\n")
		for _, r := range text {
			same := "same page and total"
			if !r.sameRows {
				same = "DIFFERENT RESULTS"
			}
			fmt.Printf("  %-28s before %8.2f ms   after %7.2f ms   %6.1fx faster   %6d matches%s   %s\n",
				r.name, ms(r.before), ms(r.after), ms(r.before)/ms(r.after), r.matches, plus(r.capped), same)
		}
		for _, r := range text {
			if !r.sameRows {
				check(fmt.Errorf("%s: the two plans answer differently", r.name))
			}
		}
	}
	fmt.Println()
}

// plus marks a total that is a lower bound.
func plus(capped bool) string {
	if capped {
		return "+"
	}
	return " "
}

// client makes authenticated requests to the gateway.
type client struct {
	base, token string
}

func (c *client) get(path string) []byte {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	check(err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	check(err)
	defer func() { _ = resp.Body.Close() }() // read to the end below
	b, err := io.ReadAll(resp.Body)
	check(err)
	if resp.StatusCode != http.StatusOK {
		check(fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b))
	}
	return b
}

func searchHTTP(c *client, queries []query, n int) {
	fmt.Println("search through the gateway (GET /api/gateway/threads, the real binary)")
	b50, b95 := timeIt(n, func() { c.get("/api/gateway/endpoints") })
	fmt.Printf("  %-28s p50 %7.2f ms  p95 %7.2f ms   (baseline: an authenticated trivial request)\n", "GET /api/gateway/endpoints", ms(b50), ms(b95))
	for _, q := range queries {
		path := "/api/gateway/threads?" + q.values().Encode()
		p50, p95 := timeIt(n, func() { c.get(path) })
		fmt.Printf("  %-28s p50 %7.2f ms  p95 %7.2f ms   p50 %5.1fx baseline   (target p50 <= 50 ms)\n", q.name, ms(p50), ms(p95), ms(p50)/ms(b50))
	}
	fmt.Println()
}

// --- resync ----------------------------------------------------------------

// fakeConnector serves the change stream of one machine: reset, its
// threads, a sentinel thread whose summary names the run, synced. The
// sentinel is the last event, and the gateway stores events in order, so
// seeing it stored means the whole resync is.
type fakeConnector struct {
	threads []fleet.Thread
}

func (fc *fakeConnector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != fleet.EventsPath {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if hs, ok := ctx.Value(http.ServerContextKey).(*http.Server); ok {
		hs.RegisterOnShutdown(cancel)
	}
	inst := fleet.NewInstance()
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := fleet.AppendEvent(nil, fleet.Event{ID: fleet.FormatEventID(inst, 0), Name: fleet.EventReset, Data: []byte(`{}`)})
	for i, t := range fc.threads {
		data, err := json.Marshal(t)
		check(err)
		buf = fleet.AppendEvent(buf[:0], fleet.Event{ID: fleet.FormatEventID(inst, uint64(i+1)), Name: fleet.EventThread, Data: data})
		if _, err := bw.Write(buf); err != nil {
			return
		}
	}
	buf = fleet.AppendEvent(buf[:0], fleet.Event{ID: fleet.FormatEventID(inst, uint64(len(fc.threads))), Name: fleet.EventSynced, Data: []byte(`{}`)})
	if _, err := bw.Write(buf); err != nil || bw.Flush() != nil {
		return
	}
	w.(http.Flusher).Flush()
	<-ctx.Done()
}

// asWire turns store threads into the connector's wire form.
func asWire(ts []store.Thread) []fleet.Thread {
	out := make([]fleet.Thread, len(ts))
	for i, t := range ts {
		out[i] = fleet.Thread{
			ID: t.ID, Workflow: t.Workflow, Status: t.Status, Prompt: t.Prompt, StartedAt: *t.StartedAt, UpdatedAt: t.UpdatedAt,
			DurationMs: t.Duration.Milliseconds(), Steps: t.Steps, ReturnCode: t.ReturnCode, Summary: t.Summary, Usage: t.Usage,
		}
	}
	return out
}

// resync measures the gateway's CPU for one connector's resync of n
// threads, from the connection to the last thread stored.
func resync(ctx context.Context, pid int, addr string, st store.Store, n, runs int) {
	fmt.Printf("resync of one connector's %d threads over its change stream (gateway CPU, median of %d)\n", n, runs)
	// Baseline: this process writing the same threads with SyncThreads, in
	// the gateway's batches of 500, into the same database (as a machine of
	// its own): what the write costs, without the stream.
	base := st
	g := newGenerator(2)
	var baseCPU []time.Duration
	for run := range runs {
		threads := g.threads(n, run+1)
		c0 := selfCPU()
		for i := 0; i < n; i += 500 {
			check(base.SyncThreads(ctx, "baseline", threads[i:min(i+500, n)]))
		}
		baseCPU = append(baseCPU, selfCPU()-c0)
	}
	baseline := medianDuration(baseCPU)
	fmt.Printf("  %-34s %7.1f ms CPU   (baseline: SyncThreads in this process)\n", "SyncThreads, all rows changed", ms(baseline))

	threads := g.threads(n, 1000)
	sentinel := 0
	// measure runs resyncs: wire(run) says which machine sends what.
	measure := func(name string, wire func(run int) (string, []store.Thread)) {
		var cpus []time.Duration
		for run := range runs {
			machine, ts := wire(run)
			sentinel++
			cpus = append(cpus, oneResync(ctx, pid, addr, machine, connectorToken(machine), st, ts, fmt.Sprintf("sentinel%d", sentinel)))
		}
		if name == "" {
			return
		}
		c := medianDuration(cpus)
		fmt.Printf("  %-34s %7.1f ms CPU   %5.2fx baseline   (target <= 1000 ms)\n", name, ms(c), ms(c)/ms(baseline))
	}
	measure("first sync (a new machine)", func(run int) (string, []store.Thread) {
		return fmt.Sprintf("resync-first-%d-%d", os.Getpid(), run), g.threads(n, 1000) // new also when a history is reused
	})
	// One unmeasured sync stores the named machine's threads, so the
	// resyncs below find them there.
	runs, all := 1, runs
	measure("", func(int) (string, []store.Thread) { return "resync-bench", threads })
	runs = all
	measure("resync, nothing changed", func(int) (string, []store.Thread) { return "resync-bench", threads })
	measure("resync, every thread changed", func(run int) (string, []store.Thread) { return "resync-bench", retag(threads, 2000+run) })
	fmt.Println()
}

// connectorTokenFn issues connector tokens (set by main's environment).
var connectorTokenFn func(name string) string

func connectorToken(name string) string { return connectorTokenFn(name) }

// retag changes every finished thread's summary tag.
func retag(ts []store.Thread, tag int) []store.Thread {
	out := slices.Clone(ts)
	re := regexp.MustCompile(` run\d+$`)
	for i := range out {
		if out[i].Summary != "" {
			out[i].Summary = re.ReplaceAllString(out[i].Summary, "") + fmt.Sprintf(" run%d", tag)
		}
	}
	return out
}

// oneResync connects a fake connector serving threads and a sentinel
// thread whose summary is mark, and returns the gateway CPU used from the
// connection until the sentinel (the last thread) is stored.
func oneResync(ctx context.Context, pid int, addr, machine, token string, st store.Store, ts []store.Thread, mark string) time.Duration {
	threads := asWire(ts)
	rc, now := 0, time.Now()
	threads = append(threads, fleet.Thread{ID: "zz-sentinel", Workflow: "bench", Status: "completed", StartedAt: now, UpdatedAt: now, ReturnCode: &rc, Summary: mark})
	c0 := cpu(pid)
	cctx, cancel := context.WithCancel(ctx)
	ws, err := tunnel.Dial(cctx, "http://"+addr, machine, token, nil)
	check(err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = tunnel.Serve(cctx, ws, &fakeConnector{threads: threads}, tunnel.ServeOptions{}) // ends with cancel below
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		t, err := st.GetThread(ctx, machine, "zz-sentinel")
		if err == nil && t.Summary == mark {
			break
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("resync of %s not stored after 2 minutes", machine))
		}
		time.Sleep(5 * time.Millisecond) // polls this process's own store handle, not the gateway
	}
	used := cpu(pid) - c0
	cancel()
	<-served
	return used
}

// --- processes ---------------------------------------------------------------

func output(bin string, env []string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = io.Discard
	b, err := cmd.Output()
	check(err)
	return string(b)
}

var listening = regexp.MustCompile(`"msg":"gateway listening","address":"([^"]+)"`)

// startGateway runs `serve` on a port of its own and returns its address,
// read from its log.
func startGateway(bin string, env []string) (*exec.Cmd, string) {
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--connect-rate", "-1")
	cmd.Env = append(os.Environ(), env...)
	logs, err := cmd.StderrPipe()
	check(err)
	cmd.Stdout = os.Stdout
	check(cmd.Start())
	sc := bufio.NewScanner(logs)
	addr := ""
	for addr == "" && sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		check(fmt.Errorf("the gateway did not say where it listens: %v", sc.Err()))
	}
	go func() { _, _ = io.Copy(io.Discard, logs) }() // keep its log from blocking it
	connectorTokenFn = func(name string) string {
		return strings.TrimSpace(output(bin, env, "token", "create", "--connector", name, "--note", "fleetbench"))
	}
	return cmd, addr
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func cpu(pid int) time.Duration {
	d, err := loadgen.CPUTime(pid)
	check(err)
	return d
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rss(pid int) int64 {
	r, _, err := loadgen.Memory(pid)
	check(err)
	return r
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func medianDuration(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func dbSize(ctx context.Context, dir, databaseURL string) string {
	if databaseURL != "" {
		db, err := sql.Open("pgx", databaseURL)
		check(err)
		defer func() { check(db.Close()) }()
		var size int64
		check(db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&size))
		return fmt.Sprintf("%.0f MB", mb(size))
	}
	var total int64
	for _, f := range []string{store.SQLiteFile, store.SQLiteFile + "-wal"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			total += fi.Size()
		}
	}
	return fmt.Sprintf("%.0f MB", mb(total))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}
