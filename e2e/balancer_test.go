package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/nginxconf"
)

// TestClusterBehindNginx runs three real replicas (NATS, PostgreSQL)
// behind nginx configured with deploy/nginx/uncaged-gateway-cluster.conf:
// see clusterBehindBalancer.
func TestClusterBehindNginx(t *testing.T) {
	t.Parallel()
	clusterBehindBalancer(t, startNginxCluster)
}

// TestClusterBehindCaddy is TestClusterBehindNginx with Caddy configured
// with deploy/caddy/Caddyfile.cluster (active checks on /readyz).
func TestClusterBehindCaddy(t *testing.T) {
	t.Parallel()
	clusterBehindBalancer(t, startCaddyCluster)
}

// clusterBehindBalancer runs three replicas of a real cluster behind the
// load balancer startFront starts, with connectors and a dashboard client
// that reach the cluster only through it, and checks what the shipped
// configuration promises:
//   - a thread's live stream arrives through it while the thread runs;
//   - while one replica stops, no GET through the balancer fails (the
//     endpoints list, and a connector held by another replica);
//   - that replica's connectors reconnect through the balancer to a live
//     replica and are reachable through it again;
//   - once every replica has stopped and one is started again, the first
//     request through the balancer after that replica's /readyz answers 200
//     succeeds: no failure is remembered past the outage;
//   - the connectors come back through the balancer to that replica.
func clusterBehindBalancer(t *testing.T, startFront func(t *testing.T, replicas []string) string) {
	tc := startCluster(t)
	natsURL, key, dash, replicas := tc.natsURL, tc.key, tc.dash, tc.replicas
	front := frontClient{addr: startFront(t, tc.addrs()), dash: dash,
		client: &http.Client{Timeout: clusterRequestTimeout + 10*time.Second}}

	names := []string{"alpha", "bravo", "charlie", "delta"}
	roots, _ := connectThrough(t, key, "http://"+front.addr, names)
	holders := front.holders
	// allOnline waits until every connector is online and reachable
	// through the balancer, held by a replica that live accepts.
	allOnline := func(what string, live func(replicaID string) bool) map[string]string {
		t.Helper()
		var held map[string]string
		testkit.WaitFor(t, what, func() error {
			held = holders()
			for _, name := range names {
				if !live(held[name]) {
					return fmt.Errorf("%s is held by %q", name, held[name])
				}
				if err := front.reachable(name); err != nil {
					return err
				}
			}
			return nil
		})
		return held
	}
	holder := allOnline("every connector online through the balancer", func(id string) bool { return id != "" })
	t.Logf("connectors held: %v", holder)
	// A live stream through the balancer arrives event by event, as
	// through the single gateway's configuration.
	clusterStream(t, front.addr, dash, "alpha", roots["alpha"])

	// Stop the replica holding alpha while GETs go through the balancer
	// without a pause: to the endpoints list, and to every connector a
	// replica that stays holds. None may fail.
	victim := replicas[0]
	for _, r := range replicas {
		if r.id == holder["alpha"] {
			victim = r
		}
	}
	paths := []string{"/api/gateway/endpoints"}
	for _, name := range names {
		if holder[name] != victim.id {
			paths = append(paths, "/api/clients/"+name+"/workflows")
		}
	}
	load := front.hammer(paths)
	testkit.WaitUntil(t, "GETs through the balancer before the stop", func() bool { return load.sent() >= 2*len(paths) })
	victim.p.stop(syscall.SIGTERM)
	holder = allOnline("the stopped replica's connectors back through the balancer", func(id string) bool { return id != "" && id != victim.id })
	// The checks after the stop counted too: a few more rounds of the
	// load's own, after everything is back, close the window.
	after := load.sent()
	testkit.WaitUntil(t, "GETs through the balancer after the reconnection", func() bool { return load.sent() >= after+2*len(paths) })
	sent, failures := load.stop()
	if len(failures) > 0 {
		t.Errorf("%d of %d GETs through the balancer failed while %s stopped; the first: %s", len(failures), sent, victim.id, strings.Join(failures[:min(5, len(failures))], "; "))
	} else {
		t.Logf("%d GETs through the balancer while %s stopped, none failed; connectors now held: %v", sent, victim.id, holder)
	}

	// Stop the others: no replica is left.
	var back *replica
	for _, r := range replicas {
		if r != victim {
			r.p.stop(syscall.SIGTERM)
			back = r
		}
	}
	if code, body, err := front.get("/api/gateway/endpoints"); err == nil && code == 200 {
		t.Fatalf("the balancer answered 200 with every replica stopped: %s", body)
	}
	// One comes back where the balancer's configuration says it is. The
	// first request after its /readyz answers (startReplicaOn waited for
	// that) goes through.
	back = startReplicaOn(t, key, natsURL, back.id, back.addr)
	if code, body, err := front.get("/api/gateway/endpoints"); err != nil || code != 200 {
		t.Fatalf("first request through the balancer after %s is ready again: %d %s %v", back.id, code, body, err)
	}
	allOnline("every connector back through the balancer on "+back.id, func(id string) bool { return id == back.id })
}

// frontClient is a dashboard client of a load balancer.
type frontClient struct {
	addr, dash string
	client     *http.Client
}

// get sends a GET through the balancer with the dashboard token.
func (f frontClient) get(path string) (int, string, error) {
	return f.send("GET", path, "")
}

// send sends a request through the balancer with the dashboard token, and
// body as JSON when there is one.
func (f frontClient) send(method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, "http://"+f.addr+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+f.dash)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// holders maps each connector online to the replica holding it, by the
// endpoints list through the balancer; nil when that list cannot be had.
func (f frontClient) holders() map[string]string {
	code, body, err := f.get("/api/gateway/endpoints")
	var eps []clusterEndpoint
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &eps) != nil {
		return nil
	}
	out := map[string]string{}
	for _, e := range eps {
		if e.Status == "online" {
			out[e.Name] = e.Replica
		}
	}
	return out
}

// waitReachable waits until every connector named is reachable through
// the balancer.
func (f frontClient) waitReachable(t *testing.T, names []string) {
	t.Helper()
	testkit.WaitFor(t, "every connector reachable through the balancer", func() error {
		for _, name := range names {
			if err := f.reachable(name); err != nil {
				return err
			}
		}
		return nil
	})
}

// reachable says why name's workflows cannot be listed through the
// balancer, or nil when they are: the request reached its connector.
func (f frontClient) reachable(name string) error {
	code, body, err := f.get("/api/clients/" + name + "/workflows")
	switch {
	case err != nil:
		return fmt.Errorf("%s: %v", name, err)
	case code != 200 || !strings.Contains(body, `"name":"wf-`+name+`"`):
		return fmt.Errorf("%s: %d %s", name, code, strings.TrimSpace(body))
	}
	return nil
}

// load is GETs sent through a balancer one after the other until stop.
type load struct {
	mu       sync.Mutex
	n        int
	failures []string
	quit     chan struct{}
	done     chan struct{}
}

// hammer sends GETs of paths in turn through the balancer, each after the
// answer to the one before, until stop; it stops by itself after 100000
// or testkit.WaitBound, whichever comes first. A path written "POST path
// body" is a POST of that JSON body, answered 201.
func (f frontClient) hammer(paths []string) *load {
	l := &load{quit: make(chan struct{}), done: make(chan struct{})}
	deadline := time.Now().Add(testkit.WaitBound)
	go func() {
		defer close(l.done)
		for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
			select {
			case <-l.quit:
				return
			default:
			}
			method, p, want, sent := "GET", paths[i%len(paths)], 200, ""
			if rest, ok := strings.CutPrefix(p, "POST "); ok {
				method, want = "POST", 201
				p, sent, _ = strings.Cut(rest, " ")
			}
			code, body, err := f.send(method, p, sent)
			l.mu.Lock()
			l.n++
			switch {
			case err != nil:
				l.failures = append(l.failures, fmt.Sprintf("%s %s: %v", method, p, err))
			case code != want:
				l.failures = append(l.failures, fmt.Sprintf("%s %s: %d %s", method, p, code, strings.TrimSpace(body)))
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *load) sent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// stop ends the load and returns how many GETs it sent and what failed.
func (l *load) stop() (int, []string) {
	close(l.quit)
	<-l.done
	return l.n, l.failures
}

// startNginxCluster runs nginx with deploy/nginx/uncaged-gateway-cluster.conf
// in front of replicas and returns its address. What it changes of the
// file is what an operator does (nginxconf.Cluster).
func startNginxCluster(t *testing.T, replicas []string) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/nginx/uncaged-gateway-cluster.conf")
	if err != nil {
		t.Fatal(err)
	}
	proxyConf, err := filepath.Abs("../deploy/nginx/proxy.conf")
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	site, err := nginxconf.Cluster(string(b), proxyConf, replicas, addr, freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	runNginx(t, addr, site)
	return addr
}

// startCaddyCluster runs Caddy with deploy/caddy/Caddyfile.cluster, as it
// is, in front of replicas and returns its address.
func startCaddyCluster(t *testing.T, replicas []string) string {
	t.Helper()
	return runCaddy(t, "../deploy/caddy/Caddyfile.cluster", "UNCAGED_GATEWAY_REPLICAS="+strings.Join(replicas, " "))
}
