package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsservertest "github.com/nats-io/nats-server/v2/test"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// clusterRequestTimeout is the replicas' --request-timeout: every request
// of the cluster test must be answered within it (plus slack for a loaded
// machine), whatever replica died.
const clusterRequestTimeout = 5 * time.Second

// replica is one gateway process of a cluster.
type replica struct {
	id, addr string
	p        *proc
}

// TestGatewayClusterOverNATS runs three gateway replicas sharing presence
// through a real NATS server, with connectors spread over them by a TCP
// balancer: every connector is reachable from every replica (live streams
// included), the endpoints list is cluster-wide, and when a replica is
// killed its connectors reconnect to the others and are reachable from
// every survivor again, no request hanging meanwhile.
func TestGatewayClusterOverNATS(t *testing.T) {
	t.Parallel()
	tc := startCluster(t)
	key, dash, replicas, addrs := tc.key, tc.dash, tc.replicas, tc.addrs()
	lb := startBalancer(t, addrs)
	client := &http.Client{Timeout: clusterRequestTimeout + 10*time.Second}
	get := func(addr, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+dash)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s did not answer: %v", addr, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	endpoints := func(addr string) map[string]clusterEndpoint {
		t.Helper()
		code, body := get(addr, "/api/gateway/endpoints")
		var eps []clusterEndpoint
		if code != 200 || json.Unmarshal([]byte(body), &eps) != nil {
			t.Fatalf("endpoints from %s: %d %s", addr, code, body)
		}
		out := map[string]clusterEndpoint{}
		for _, e := range eps {
			out[e.Name] = e
		}
		return out
	}

	names := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	roots, _ := connectThrough(t, key, "http://"+lb, names)
	allOnline := func(live []*replica, avoid string) func() bool {
		return func() bool {
			for _, r := range live {
				eps := endpoints(r.addr)
				for _, name := range names {
					if e := eps[name]; e.Status != "online" || e.Replica == "" || e.Replica == avoid {
						return false
					}
				}
			}
			return true
		}
	}
	testkit.WaitUntil(t, "every replica to list every connector online", allOnline(replicas, ""))

	// Spread: the balancer gave each replica some connectors.
	holder := map[string]string{}
	held := map[string][]string{}
	for name, e := range endpoints(replicas[0].addr) {
		holder[name] = e.Replica
		held[e.Replica] = append(held[e.Replica], name)
	}
	for _, r := range replicas {
		if len(held[r.id]) == 0 {
			t.Fatalf("replica %s holds no connector: %v", r.id, holder)
		}
	}

	reachable := func(addr, name string) (bool, string) {
		code, body := get(addr, "/api/clients/"+name+"/workflows")
		switch {
		case code == 200 && strings.Contains(body, `"name":"wf-`+name+`"`):
			return true, ""
		case code == 200:
			t.Fatalf("%s via %s answered for another connector: %s", name, addr, body)
		case !strings.HasPrefix(strings.TrimSpace(body), `{"error":`):
			t.Fatalf("%s via %s: %d without a JSON error: %s", name, addr, code, body)
		}
		return false, fmt.Sprintf("%s via %s: %d %s", name, addr, code, strings.TrimSpace(body))
	}
	for _, r := range replicas {
		for _, name := range names {
			if ok, why := reachable(r.addr, name); !ok {
				t.Fatal(why)
			}
		}
	}

	// A live stream through a replica that does not hold the connector
	// passes through as it comes: a step arrives while the thread runs.
	streamed := names[0]
	var via *replica
	for _, r := range replicas {
		if r.id != holder[streamed] {
			via = r
			break
		}
	}
	clusterStream(t, via.addr, dash, streamed, roots[streamed])
	if n := metricValue(t, via.addr, "uncaged_gateway_cluster_forwarded_requests_total", `result="ok"`); n < 1 {
		t.Fatalf("%s forwarded nothing according to its metrics", via.id)
	}
	if n := metricValue(t, via.addr, "uncaged_gateway_cluster_peers", ""); n != 2 {
		t.Fatalf("%s counts %v peers", via.id, n)
	}

	// Kill the replica holding the streamed connector: only its
	// connectors drop, they reconnect through the balancer to the others,
	// and every survivor reaches them again within 30 s. No request hangs
	// meanwhile (get fails the test on a client timeout).
	var victim *replica
	var survivors []*replica
	for _, r := range replicas {
		if r.id == holder[streamed] {
			victim = r
		} else {
			survivors = append(survivors, r)
		}
	}
	victim.p.stop(syscall.SIGKILL)
	// Requests sent to the survivors at once, before the victim's
	// connectors are back, never reached the dead replica: they wait for
	// their connector to reconnect and then go through — reads and thread
	// starts alike — and a start is done once. Only a connector not back
	// within the hold may be answered 503 with Retry-After; never 502.
	var victimHeld []string
	for _, name := range names {
		if holder[name] == victim.id {
			victimHeld = append(victimHeld, name)
		}
	}
	started := map[string]int{}
	for _, r := range survivors {
		for _, name := range victimHeld {
			for _, method := range []string{"GET", "POST"} {
				path, body, want := "/api/clients/"+name+"/workflows", "", 200
				if method == "POST" {
					path, body, want = "/api/clients/"+name+"/threads", `{"workflow":"wf-`+name+`","prompt":"just after the kill"}`, 201
				}
				req, _ := http.NewRequest(method, "http://"+r.addr+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+dash)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s %s via %s just after the kill: %v", method, path, r.id, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == want:
					if method == "POST" {
						started[name]++
					}
				case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
					t.Logf("%s %s via %s: %s was not back within the hold: %s", method, path, r.id, name, b)
				default:
					t.Fatalf("%s %s via %s just after %s was killed: %d %s (want %d, held until the connector is back)", method, path, r.id, victim.id, resp.StatusCode, b, want)
				}
			}
		}
	}
	for _, name := range victimHeld {
		listed := strings.Count(run(t, roots[name], "thread", "list", "-o", "table").stdout, "  wf-"+name+"  ")
		if listed != started[name] {
			t.Fatalf("%s: %d thread starts answered 201 just after the kill, %d threads on its machine", name, started[name], listed)
		}
	}
	if n := metricValue(t, survivors[0].addr, "uncaged_gateway_cluster_forwarded_requests_total", `result="error"`); n != 0 {
		t.Errorf("%s counts %v forwards failed; every request for the dead replica's connectors waited for them", survivors[0].id, n)
	}
	lastWhy := ""
	testkit.WaitUntil(t, "the dead replica's connectors to be reachable from every survivor", func() bool {
		for _, r := range survivors {
			for _, name := range names {
				if ok, why := reachable(r.addr, name); !ok {
					if why != lastWhy { // each distinct answer once
						t.Log(why)
						lastWhy = why
					}
					return false
				}
			}
		}
		return true
	})
	testkit.WaitUntil(t, "the survivors to list every connector online elsewhere", allOnline(survivors, victim.id))
	for _, name := range names {
		if holder[name] != victim.id {
			if now := endpoints(survivors[0].addr)[name].Replica; now != holder[name] {
				t.Errorf("%s moved from %s to %s although its replica lived", name, holder[name], now)
			}
		}
	}
	for _, r := range survivors {
		if code, body := get(r.addr, "/readyz"); code != 200 {
			t.Fatalf("%s not ready: %s", r.id, body)
		}
	}
}

type clusterEndpoint struct {
	Name, Status, Replica string
}

// clusterKey generates a cluster's signing key and gives the cluster a
// PostgreSQL database of its own (cluster mode needs one), registered
// under the key for startReplica and the token commands (useStore).
func clusterKey(t *testing.T) string {
	t.Helper()
	url := pgtest.URL(t)
	key := gwCLI(t, "", "key", "generate")
	useStore(key, "UNCAGED_GATEWAY_DATABASE_URL="+url)
	return key
}

// startReplica runs one gateway of the cluster whose key clusterKey made,
// on the cluster's database, and waits for it to be ready (connected to
// NATS).
// testCluster is three replicas, r1 to r3, sharing a real NATS server
// and a database of their own, with a dashboard token.
type testCluster struct {
	natsURL, key, dash string
	replicas           []*replica
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	return startClusterOf(t, 3)
}

// startClusterOf is startCluster with n replicas.
func startClusterOf(t *testing.T, n int) *testCluster {
	t.Helper()
	// The NATS server's own test helper: a real server on a random
	// loopback port, without logs or signal handlers.
	ns := natsservertest.RunRandClientPortServer()
	t.Cleanup(ns.Shutdown)
	tc := &testCluster{natsURL: ns.ClientURL(), key: clusterKey(t)}
	tc.dash = gwCLI(t, tc.key, "token", "create", "--dashboard")
	for i := 1; i <= n; i++ {
		tc.replicas = append(tc.replicas, startReplica(t, tc.key, tc.natsURL, fmt.Sprintf("r%d", i)))
	}
	return tc
}

// addrs are the replicas' addresses.
func (tc *testCluster) addrs() []string {
	var out []string
	for _, r := range tc.replicas {
		out = append(out, r.addr)
	}
	return out
}

// connectThrough starts a connector for each name, dialing gateway, on a
// root of its own holding "wf-<name>" (linear: who answered tells itself)
// and "slow"; they stop together when the test ends.
func connectThrough(t *testing.T, key, gateway string, names []string) (roots map[string]string, conns []*proc) {
	t.Helper()
	roots = map[string]string{}
	for _, name := range names {
		root := engineRoot(t)
		roots[name] = root
		add(t, root, "wf-"+name, "linear.esm.js")
		add(t, root, "slow", "slow.esm.js")
		tok := gwCLI(t, key, "token", "create", "--connector", name)
		conns = append(conns, startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok},
			"uncaged-workflow", "connect", "--name", name, "--gateway", gateway))
	}
	stopTogether(t, conns...)
	return roots, conns
}

func startReplica(t *testing.T, key, natsURL, id string) *replica {
	t.Helper()
	return startReplicaOn(t, key, natsURL, id, "127.0.0.1:0")
}

// startReplicaOn is startReplica listening on listen: a replica that comes
// back where a load balancer's configuration says it is; args are more
// flags of serve.
func startReplicaOn(t *testing.T, key, natsURL, id, listen string, args ...string) *replica {
	t.Helper()
	r := &replica{id: id}
	db, ok := storeOf(key)
	if !ok {
		t.Fatal("startReplica: no database for this key (clusterKey)")
	}
	serve := append([]string{"serve", "--listen", listen, "--replica-id", id, "--heartbeat", "1s",
		"--request-timeout", clusterRequestTimeout.String(),
		// Behind the balancer every connector comes from one address.
		"--connect-rate", "-1"}, args...)
	r.p = startProc(t, append([]string{"UNCAGED_GATEWAY_KEY=" + key, "UNCAGED_GATEWAY_NATS=" + natsURL}, db...), "uncaged-gateway", serve...)
	r.addr = r.p.listening(t)
	waitOK(t, "replica "+id+" to be ready", "http://"+r.addr+"/readyz")
	return r
}

// startBalancer is a TCP load balancer on loopback: each connection goes
// to the next backend in turn that accepts it, so a dead backend is
// skipped — what a cloud load balancer in front of the replicas does.
func startBalancer(t *testing.T, backends []string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ln.Close(); err != nil {
			t.Error(err)
		}
	})
	var next atomic.Uint64
	// Closing this process's end of a connection fails only for one
	// closed already; a copy ends when either side goes, and its error
	// says only which went first.
	serve := func(c net.Conn) {
		defer func() { _ = c.Close() }()
		for range backends {
			up, err := net.DialTimeout("tcp", backends[(next.Add(1)-1)%uint64(len(backends))], time.Second)
			if err != nil {
				continue
			}
			defer func() { _ = up.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done // either side closing ends both
			return
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// clusterStream starts the slow workflow on name through addr and follows
// its live stream there to the end, checking a step arrived while the
// thread still ran.
func clusterStream(t *testing.T, addr, dash, name, root string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/clients/"+name+"/threads", strings.NewReader(`{"workflow":"slow","prompt":"across replicas"}`))
	req.Header.Set("Authorization", "Bearer "+dash)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct{ ThreadID string }
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || json.Unmarshal(b, &started) != nil {
		t.Fatalf("start on %s via %s: %d %s", name, addr, resp.StatusCode, b)
	}
	stream, err := http.Get("http://" + addr + "/api/clients/" + name + "/threads/" + started.ThreadID + "/live?key=" + dash)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("live via %s: %v %v", addr, stream, err)
	}
	defer stream.Body.Close()
	sc := bufio.NewScanner(stream.Body)
	sawRoleWhileRunning, sawDone := false, false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"role"`) && !sawRoleWhileRunning {
			sawRoleWhileRunning = show(t, root, started.ThreadID).Result == nil
		}
		if line == "event: done" {
			sawDone = true
			break
		}
	}
	if !sawRoleWhileRunning || !sawDone {
		t.Fatalf("forwarded stream: role while running %v, done %v", sawRoleWhileRunning, sawDone)
	}
}

// metricValue sums a metric's samples whose labels contain match.
func metricValue(t *testing.T, addr, metric, match string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s/metrics: %v", addr, err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if (strings.HasPrefix(line, metric+" ") || strings.HasPrefix(line, metric+"{")) && strings.Contains(line, match) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s/metrics: %q: %v", addr, line, err)
			}
			sum += v
		}
	}
	return sum
}
