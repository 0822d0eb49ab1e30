package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"

	"github.com/uncaged/workflow/bench/loadgen"
	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/requestid"
)

// requestLines are the JSON "request" log lines in a process's output.
func (p *proc) requestLines() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(p.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// requestLine is the request line with id (nil: none yet).
func (p *proc) requestLine(id string) map[string]any {
	for _, m := range p.requestLines() {
		if m["request_id"] == id {
			return m
		}
	}
	return nil
}

// loadGateway is a gateway for the load tests: no connection rate or
// count limit per address (a hundred connectors and the clients' 256
// connections dial from one address), the default heartbeat (a
// busy test process under the race detector can miss 1 s pings, and that
// would be a false alarm here), and its key at hand to issue tokens in
// this process.
type loadGateway struct {
	t         *testing.T
	addr      string
	key, dash string
	authority *auth.Authority
	proc      *proc
	// dataDir holds the gateway's store; a restart keeps it.
	dataDir string
}

func startLoadGateway(t *testing.T) *loadGateway {
	g := &loadGateway{t: t, dataDir: t.TempDir()}
	g.key = gwCLI(t, "", "key", "generate")
	useStore(g.key, "UNCAGED_GATEWAY_DATA_DIR="+g.dataDir)
	g.dash = gwCLI(t, g.key, "token", "create", "--dashboard")
	raw, err := auth.LoadKey("", func(string) string { return g.key })
	if err != nil {
		t.Fatal(err)
	}
	if g.authority, err = auth.New(raw, ""); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// start starts the gateway: the first time on a port of its own, then on
// the same address.
func (g *loadGateway) start() {
	g.t.Helper()
	listen := g.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	g.proc = startProc(g.t, []string{"UNCAGED_GATEWAY_KEY=" + g.key}, "uncaged-gateway",
		"serve", "--listen", listen, "--connect-rate", "-1", "--max-conns-per-ip", "-1", "--data-dir", g.dataDir)
	g.addr = g.proc.listening(g.t)
	waitOK(g.t, "the gateway to answer /healthz", "http://"+g.addr+"/healthz")
}

func (g *loadGateway) token(name string) string {
	tok, err := g.authority.Issue(auth.RoleConnector, name, time.Hour)
	if err != nil {
		g.t.Fatal(err)
	}
	return tok
}

// TestLoadAndGatewayRestartUnderLoad drives 100 simulated connectors (real
// WebSockets and tunnels, reconnecting as the real connector does) at 5
// requests a second each through a real gateway: first steady, where
// every request must succeed, then across a gateway restart, where every
// connector must come back and requests must succeed again. Errors are
// allowed only while the gateway is away (from its stop until every
// connector has reconnected), and no request may hang: the gateway answers
// or refuses, it never leaves a request to time out. The request timeout
// is generous because the test process runs the hundred connectors and
// the clients under the race detector, often on a busy machine: latency
// here says nothing (bench/cmd/loadtest measures it), errors do.
func TestLoadAndGatewayRestartUnderLoad(t *testing.T) {
	// Serial: a hundred connectors and 256 client connections take the machine; side by side, other tests would starve and so would it.
	if testing.Short() {
		t.Skip("load test")
	}
	const connectors, rate = 100, 5
	g := startLoadGateway(t)
	names := make([]string, connectors)
	tokens := map[string]string{}
	for i := range names {
		names[i] = "load-" + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
		tokens[names[i]] = g.token(names[i])
	}
	fleet := loadgen.StartFleet(loadgen.FleetOptions{Gateway: "http://" + g.addr, Names: names, Token: func(n string) string { return tokens[n] }})
	t.Cleanup(fleet.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fleet.WaitFor(ctx, loadgen.AllOnline); err != nil {
		t.Fatalf("connecting the fleet: %v", err)
	}

	// At most one request outstanding per client connection: on a machine
	// too busy to carry the offered load, a request waiting for a
	// connection would spend its timeout in the client's own queue and
	// read as a hung gateway. Past the bound the client sends nothing and
	// says so (KindShed), which is the harness's limit, not an error.
	drive := loadgen.DriveOptions{Gateway: "http://" + g.addr, Token: g.dash, Names: names, Rate: rate, Timeout: 30 * time.Second, Conns: 256, MaxInFlight: 256}
	steady := drive
	steady.Duration = 5 * time.Second
	run := loadgen.Drive(ctx, steady)
	st := loadgen.Summarize(run.Samples, nil, run.Ended.Sub(run.Began))
	if want := connectors * rate * 5; st.Requests != want || gatewayErrors(st) != 0 || st.ByKind[loadgen.KindShed] == st.Requests {
		t.Fatalf("steady load: %d requests (want %d), %d errors: %s", st.Requests, want, st.Errors, st.Kinds())
	}
	t.Logf("steady: %d requests (%d not sent, the client saturated), p50 %s, p99 %s, max %s", st.Requests, st.ByKind[loadgen.KindShed], st.P50, st.P99, st.Max)

	// Under load: restart the gateway once the load flows, and keep the
	// load on until requests have succeeded again after every connector
	// is back.
	var okTotal, answeredAfterBack atomic.Int64
	var backAt atomic.Pointer[time.Time]
	var seenAfterBack sync.Map // connector name → struct{}
	chaos := drive
	chaos.Duration = 10 * time.Minute // ended by stopLoad
	chaos.Observe = func(s loadgen.Sample) {
		if s.Kind != "" {
			return
		}
		okTotal.Add(1)
		if b := backAt.Load(); b != nil && s.Start.After(*b) {
			if _, seen := seenAfterBack.LoadOrStore(s.Name, struct{}{}); !seen {
				answeredAfterBack.Add(1)
			}
		}
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	runc := make(chan *loadgen.Run, 1)
	go func() { runc <- loadgen.Drive(loadCtx, chaos) }()
	testkit.WaitUntil(t, "the load to flow", func() bool { return okTotal.Load() >= 200 })

	stopped := time.Now()
	g.proc.stop(syscall.SIGTERM)
	g.start()
	if err := fleet.WaitFor(ctx, loadgen.ReconnectedSince(stopped)); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	back := time.Now()
	backAt.Store(&back)
	testkit.WaitUntil(t, "a successful request to every connector after the restart", func() bool { return answeredAfterBack.Load() == connectors })
	stopLoad()
	run = <-runc

	window := loadgen.Window{From: stopped, To: back}
	outside := loadgen.Summarize(run.Samples, func(s loadgen.Sample) bool { return !window.Overlaps(s) }, 0)
	inside := loadgen.Summarize(run.Samples, window.Overlaps, 0)
	all := loadgen.Summarize(run.Samples, nil, 0)
	t.Logf("restart: %d connectors back after %s; %d requests, %d errors in the window (%s), %d outside (%s)",
		fleet.Size(), back.Sub(stopped).Round(time.Millisecond), all.Requests, inside.Errors, inside.Kinds(), outside.Errors, outside.Kinds())
	if gatewayErrors(outside) != 0 {
		t.Errorf("%d errors outside the restart window: %s", outside.Errors, outside.Kinds())
	}
	if n := all.ByKind[loadgen.KindTimeout]; n != 0 {
		t.Errorf("%d requests hung until their timeout", n)
	}
	if online := countOnline(t, g.addr, g.dash); online != connectors {
		t.Errorf("the gateway lists %d of %d connectors online", online, connectors)
	}
}

// gatewayErrors counts st's errors that the gateway caused: all but the
// requests the client did not send because it was saturated.
func gatewayErrors(st loadgen.Stats) int { return st.Errors - st.ByKind[loadgen.KindShed] }

func countOnline(t *testing.T, addr, dash string) int {
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+dash)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eps []struct{ Status string }
	if err := json.NewDecoder(resp.Body).Decode(&eps); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range eps {
		if e.Status == "online" {
			n++
		}
	}
	return n
}

// TestRequestIDAcrossGatewayAndConnector sends requests through a real
// gateway to a real `uncaged-workflow connect` and finds each one's id in
// the response header and in one JSON log line of each process — the id
// the gateway assigned, or the client's when it is sane — with no token in
// either log.
func TestRequestIDAcrossGatewayAndConnector(t *testing.T) {
	t.Parallel()
	g := startLoadGateway(t)
	conn := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + engineRoot(t), "UNCAGED_WORKFLOW_TOKEN=" + g.token("laptop")},
		"uncaged-workflow", "--log-format", "json", "connect", "--name", "laptop", "--gateway", "http://"+g.addr)
	testkit.WaitUntil(t, "the connector to connect", func() bool { return countOnline(t, g.addr, g.dash) == 1 })

	get := func(incoming string) string {
		t.Helper()
		// The dashboard token rides in ?key= here, as EventSource sends it:
		// it must not reach either log.
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/api/clients/laptop/workflows?key="+g.dash, nil)
		if incoming != "" {
			req.Header.Set(requestid.Header, incoming)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ids := resp.Header.Values(requestid.Header)
		if resp.StatusCode != 200 || len(ids) != 1 || !requestid.Valid(ids[0]) {
			t.Fatalf("GET workflows: %d, X-Request-Id %q", resp.StatusCode, ids)
		}
		return ids[0]
	}
	assigned := get("")
	kept := get("dashboard-trace.42")
	replaced := get("not a sane id")
	if kept != "dashboard-trace.42" || replaced == "not a sane id" || assigned == replaced {
		t.Fatalf("ids: assigned %q, kept %q, replaced %q", assigned, kept, replaced)
	}
	for _, id := range []string{assigned, kept, replaced} {
		testkit.WaitUntil(t, "both request lines of "+id, func() bool { return g.proc.requestLine(id) != nil && conn.requestLine(id) != nil })
		gw, cn := g.proc.requestLine(id), conn.requestLine(id)
		if gw["connector"] != "laptop" || gw["path"] != "/api/clients/laptop/workflows" || gw["status"] != float64(200) || gw["method"] != "GET" {
			t.Errorf("gateway line: %v", gw)
		}
		if cn["path"] != "/api/workflows" || cn["status"] != float64(200) || cn["method"] != "GET" {
			t.Errorf("connector line: %v", cn)
		}
		for _, line := range []map[string]any{gw, cn} {
			if _, ok := line["duration_ms"].(float64); !ok {
				t.Errorf("no duration_ms: %v", line)
			}
		}
	}
	for name, p := range map[string]*proc{"gateway": g.proc, "connector": conn} {
		if out := p.logs.String(); strings.Contains(out, g.dash) || strings.Contains(out, "not a sane id") {
			t.Errorf("the %s log holds a token or the rejected id", name)
		}
	}
}
