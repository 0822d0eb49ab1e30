package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
)

var clusterTestKey = []byte(strings.Repeat("k", 32))

// newReplica is a gateway in cluster mode, served like the binary serves
// it (HTTP/1 and unencrypted HTTP/2); mutate changes its options.
func newReplica(t *testing.T, natsURL, id string, mutate ...func(*Options)) *fixture {
	t.Helper()
	a, err := auth.New(clusterTestKey, "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	cl, err := cluster.New(cluster.Options{NATS: natsURL, ReplicaID: id, Advertise: "http://" + srv.Listener.Addr().String(),
		// A replica silent for three intervals expires: 100 ms here
		// expired live replicas on a loaded machine.
		Key: clusterTestKey, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Auth: a, Heartbeat: time.Hour, RequestTimeout: testkit.WaitBound, Cluster: cl}
	for _, m := range mutate {
		m(&opts)
	}
	g := New(opts)
	g.started = g.started.Add(-RestartGrace) // unknown connectors are 404
	srv.Config.Handler = g.Handler()
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	if err := g.StartCluster(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); g.Shutdown(); srv.Close() })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	return &fixture{t: t, auth: a, gw: g, srv: srv, dash: dash}
}

type replicaEndpoint struct {
	presence.Endpoint
	Replica string `json:"replica"`
}

func (f *fixture) clusterEndpoints() map[string]replicaEndpoint {
	f.t.Helper()
	resp, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil)
	var eps []replicaEndpoint
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil {
		f.t.Fatalf("endpoints: %d %s", resp.StatusCode, body)
	}
	out := map[string]replicaEndpoint{}
	for _, e := range eps {
		out[e.Name] = e
	}
	return out
}

func (f *fixture) waitHeld(name, replica string) {
	f.t.Helper()
	testkit.WaitUntil(f.t, name+" to be online on "+replica, func() bool {
		e := f.clusterEndpoints()[name]
		return e.Replica == replica && e.Status == presence.Online
	})
}

func TestClusterForwardsToTheReplicaHoldingTheConnector(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	r1.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Neither the dashboard's credentials nor the hop reach the connector.
		fmt.Fprintf(w, `{"path":%q,"auth":%q,"hop":%q}`, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get(cluster.HopHeader))
	}))
	r2.waitHeld("laptop", "r1")

	resp, body := r2.do("GET", "/api/clients/laptop/workflows", r2.dash, nil)
	if resp.StatusCode != 200 || body != `{"path":"/api/workflows","auth":"","hop":""}` {
		t.Fatalf("via r2: %d %s", resp.StatusCode, body)
	}
	// The holder still checks the dashboard's credentials.
	if resp, body := r2.do("GET", "/api/clients/laptop/workflows", "", nil); resp.StatusCode != 401 {
		t.Fatalf("no token via r2: %d %s", resp.StatusCode, body)
	}
	if resp, body := r2.do("GET", "/api/clients/nobody/workflows", r2.dash, nil); resp.StatusCode != 404 || !strings.Contains(body, "connector not found") {
		t.Fatalf("unknown via r2: %d %s", resp.StatusCode, body)
	}

	// A forged hop header is refused; a genuine one is served from the
	// replica's own connectors and never forwarded again.
	req, _ := http.NewRequest("GET", r1.srv.URL+"/api/clients/laptop/workflows", nil)
	req.Header.Set("Authorization", "Bearer "+r1.dash)
	req.Header.Set(cluster.HopHeader, "1.abc.r2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("forged hop: %d", resp.StatusCode)
	}
	r3, err := cluster.New(cluster.Options{NATS: "nats://127.0.0.1:1", ReplicaID: "r3", Advertise: "http://127.0.0.1:1", Key: clusterTestKey})
	if err != nil {
		t.Fatal(err)
	}
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if out := r3.Forward(w, r, cluster.Route{Replica: "r2", Advertise: r2.srv.URL, Online: true}); out != cluster.Answered {
			w.WriteHeader(290 + int(out)) // r2 said it does not hold laptop: 292
		}
	}))
	defer hop.Close()
	if resp, body := (&fixture{t: t, srv: hop}).do("GET", "/api/clients/laptop/workflows", r2.dash, nil); resp.StatusCode != 290+int(cluster.NotHeld) {
		t.Fatalf("forwarded twice: %d %s", resp.StatusCode, body)
	}

	// laptop reconnects to r2: the newer connection wins, r1 lets go.
	r2.connector("laptop", echoAPI("laptop on r2"))
	r1.waitStatus("laptop", presence.Offline)
	r1.waitHeld("laptop", "r2")
	resp, body = r1.do("GET", "/api/clients/laptop/workflows", r1.dash, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "laptop on r2") {
		t.Fatalf("via r1 after the move: %d %s", resp.StatusCode, body)
	}
	resp, body = r1.do("GET", "/metrics", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("r1 metrics: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{"uncaged_gateway_cluster_peers 1", `uncaged_gateway_cluster_forwarded_requests_total{result="ok"} 1`, "uncaged_gateway_cluster_nats_connected 1"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("r1 metrics lack %q", want)
		}
	}

	// An original client registers through one replica; the one holding
	// its socket learns its client token, and of its unregistering.
	resp, body = r2.do("POST", "/api/gateway/register", "", strings.NewReader(`{"name":"old-client","url":"http://10.0.0.5:3000","secret":"shared-secret","clientToken":"ct-1"}`))
	if resp.StatusCode != 201 {
		t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
	testkit.WaitUntil(t, "r1 to learn the client token", func() bool { return r1.gw.registrations.ClientToken("old-client") == "ct-1" })
	if resp, body := r2.do("DELETE", "/api/gateway/register/old-client", "shared-secret", nil); resp.StatusCode != 200 {
		t.Fatalf("unregister: %d %s", resp.StatusCode, body)
	}
	testkit.WaitUntil(t, "r1 to forget the client token", func() bool { return r1.gw.registrations.ClientToken("old-client") == "" })

	// Cut off from NATS, a replica stays ready (every replica shares
	// NATS: failing readiness for it would empty the balancer), says so,
	// and still forwards to where the others said their connectors are.
	if resp, body := r1.do("GET", "/readyz", "", nil); resp.StatusCode != 200 || !strings.Contains(body, `"nats":{"peers":1,"status":"connected"}`) {
		t.Fatalf("readyz %d %s", resp.StatusCode, body)
	}
	ns.Shutdown()
	testkit.WaitUntil(t, "r1 to say it is cut off from NATS", func() bool {
		resp, body := r1.do("GET", "/readyz", "", nil)
		return resp.StatusCode == 200 && strings.Contains(body, `"status":"disconnected"`)
	})
	if resp, body := r1.do("GET", "/api/clients/laptop/workflows", r1.dash, nil); resp.StatusCode != 200 {
		t.Fatalf("through r1 cut off from NATS: %d %s", resp.StatusCode, body)
	}
}

// A request is counted once in the cluster, by the replica it entered
// at: sent through r2 to a connector r1 holds, it counts on r2 (the
// status its client got, the time to headers with the hop, the bytes each
// way) and not again on r1, which counts only what entered there. So
// every metric a proxied request touches sums over the replicas to the
// cluster's traffic.
func TestARequestIsCountedOnceWhereItEnteredTheCluster(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	holder, entry := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	holder.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/broken" {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d bytes", len(body))
	}))
	entry.waitHeld("laptop", "r1")

	// Through each replica: some reads, some writes with a body, and a
	// failure from the connector.
	type sent struct{ ok, failed, in, out int }
	traffic := map[*fixture]*sent{holder: {}, entry: {}}
	for i := range 7 {
		for f, s := range traffic {
			method, path, body := "GET", "/api/clients/laptop/threads", ""
			switch i % 3 {
			case 1:
				method, body = "POST", strings.Repeat("b", 10*i)
			case 2:
				path = "/api/clients/laptop/broken"
			}
			resp, answer := f.do(method, path, f.dash, strings.NewReader(body))
			switch resp.StatusCode {
			case 200:
				s.ok++
			case 500:
				s.failed++
			default:
				t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, answer)
			}
			s.in += len(body)
			s.out += len(answer)
		}
	}
	scraped := map[*fixture]map[string]*dto.MetricFamily{holder: holder.scrape(""), entry: entry.scrape("")}
	for _, m := range []struct {
		series string
		want   func(s *sent) float64
	}{
		{"uncaged_gateway_proxy_requests_total code 2xx", func(s *sent) float64 { return float64(s.ok) }},
		{"uncaged_gateway_proxy_requests_total code 5xx", func(s *sent) float64 { return float64(s.failed) }},
		{"uncaged_gateway_proxy_requests_total code 4xx", func(*sent) float64 { return 0 }},
		{"uncaged_gateway_proxy_duration_seconds", func(s *sent) float64 { return float64(s.ok + s.failed) }},
		{"uncaged_gateway_proxy_bytes_total direction in", func(s *sent) float64 { return float64(s.in) }},
		{"uncaged_gateway_proxy_bytes_total direction out", func(s *sent) float64 { return float64(s.out) }},
		{"uncaged_gateway_auth_failures_total reason invalid", func(*sent) float64 { return 0 }},
	} {
		parts := strings.Split(m.series, " ")
		sum, want := 0.0, 0.0
		for f, s := range traffic {
			got := metricValue(scraped[f], parts[0], parts[1:]...)
			if got != m.want(s) {
				t.Errorf("%s on %s = %v, want %v: what entered there", m.series, f.gw.opts.Cluster.ReplicaID(), got, m.want(s))
			}
			sum += got
			want += m.want(s)
		}
		if sum != want {
			t.Errorf("%s over the cluster = %v, want %v", m.series, sum, want)
		}
	}
	forwarded := float64(traffic[entry].ok + traffic[entry].failed)
	if got := metricValue(scraped[entry], "uncaged_gateway_cluster_forwarded_requests_total", "result", "ok"); got != forwarded {
		t.Errorf("r2 forwarded %v, want %v", got, forwarded)
	}
}
