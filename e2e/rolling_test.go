package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsservertest "github.com/nats-io/nats-server/v2/test"

	"github.com/uncaged/workflow/shared/testkit"
)

// A rolling restart at Kubernetes pace — each replica gets SIGTERM, and
// the next one as soon as the restarted one's /readyz answers 200 — of
// three replicas behind nginx (deploy/nginx/uncaged-gateway-cluster.conf)
// fails no request — reads, thread starts and live streams: each stopping replica's connectors move to another
// replica before their old tunnels close, so no connector is ever away
// (none prints a disconnection), every replica exits 0 without a warning,
// and a live stream that its replica's stop ends resumes with
// Last-Event-ID through the balancer, with no event lost or repeated.
func TestRollingRestartBehindNginxFailsNoRequest(t *testing.T) {
	t.Parallel()
	tc := startCluster(t)
	natsURL, key, replicas := tc.natsURL, tc.key, tc.replicas
	front := frontClient{addr: startNginxCluster(t, tc.addrs()), dash: tc.dash,
		client: &http.Client{Timeout: clusterRequestTimeout + 10*time.Second}}
	names := []string{"alpha", "bravo", "charlie"}
	roots, conns := connectThrough(t, key, "http://"+front.addr, names)
	front.waitReachable(t, names)

	// A thread held at its second step keeps a live stream open across
	// the whole restart.
	gate := filepath.Join(t.TempDir(), "gate")
	id := startEnv(t, roots["alpha"], []string{"SLOW_GATE=" + gate}, "slow")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	follower := followLive(front, "/api/clients/alpha/threads/"+id+"/live")
	testkit.WaitUntil(t, "the live stream to show the first step", func() bool { return follower.records() >= 1 })

	paths := []string{"/api/gateway/endpoints"}
	for _, name := range names {
		paths = append(paths, "/api/clients/"+name+"/workflows", "/api/clients/"+name+"/threads",
			"POST /api/clients/"+name+`/threads {"workflow":"wf-`+name+`","prompt":"during the rolling restart"}`)
	}
	load := front.hammer(paths)
	testkit.WaitUntil(t, "requests through nginx before the restart", func() bool { return load.sent() >= 2*len(paths) })
	for i, r := range replicas {
		before := load.sent()
		stopsCleanly(t, "replica "+r.id+" in a rolling restart", r.p)
		replicas[i] = startReplicaOn(t, key, natsURL, r.id, r.addr)
		testkit.WaitUntil(t, "requests through nginx after "+r.id+" is back", func() bool { return load.sent() >= before+len(paths) })
	}
	sent, failures := load.stop()
	// The one failure a stop cannot rule out where the kernel has no
	// socket filters (this machine's): a POST nginx sent on a connection
	// the kernel completed in the microseconds between the drain's last
	// look at its queue and the close (docs/operations.md, "Stopping a
	// gateway"). At most one per stop; anything else fails the test.
	var residual, other []string
	for _, f := range failures {
		if strings.HasPrefix(f, "POST ") && strings.Contains(f, ": 502 <html>") {
			residual = append(residual, f)
		} else {
			other = append(other, f)
		}
	}
	if len(other) > 0 || len(residual) > len(replicas) {
		t.Errorf("%d of %d requests through nginx failed during the rolling restart; the first: %s", len(failures), sent, strings.Join(failures[:min(5, len(failures))], "; "))
	} else {
		t.Logf("%d requests through nginx during the rolling restart; failed: %d reset at a listener's close (%v)", sent, len(residual), residual)
	}
	moved := 0
	for i, c := range conns {
		out := c.logs.String()
		if strings.Contains(out, "disconnected from gateway") {
			t.Errorf("connector %s was away during the rolling restart:\n%s", names[i], out)
		}
		moved += strings.Count(out, "moved to another gateway replica")
	}
	if moved == 0 {
		t.Error("no connector moved during the rolling restart")
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the live stream to end with the thread", follower.finished)
	ids, resumed, broken := follower.result()
	if broken != "" {
		t.Fatalf("the live stream broke: %s", broken)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("event %s came twice across %d resumptions: %v", id, resumed, ids)
		}
		seen[id] = true
	}
	// What one stream opened now, with nothing stopping, shows.
	whole := followLive(front, "/api/clients/alpha/threads/"+id+"/live")
	testkit.WaitUntil(t, "a stream of the finished thread to end", whole.finished)
	if _, _, broken := whole.result(); broken != "" {
		t.Fatalf("a stream of the finished thread broke: %s", broken)
	}
	if got, want := follower.records(), whole.records(); got != want || want < 5 {
		t.Fatalf("the live stream showed %d records across %d resumptions; a stream of the finished thread shows %d", got, resumed, want)
	}
	t.Logf("the live stream resumed %d times, %d events, none repeated; %d connector moves", resumed, len(ids), moved)
}

// liveFollower reads a live stream through the balancer as an
// EventSource does: when it ends without "done", it opens it again with
// the last event id it got as Last-Event-ID.
type liveFollower struct {
	mu      sync.Mutex
	ids     []string
	recs    int
	resumed int
	broken  string
	done    bool
}

func followLive(front frontClient, path string) *liveFollower {
	f := &liveFollower{}
	go func() {
		last := ""
		for attempt := 0; attempt < 50; attempt++ {
			req, _ := http.NewRequest("GET", "http://"+front.addr+path, nil)
			req.Header.Set("Authorization", "Bearer "+front.dash)
			req.Header.Set("Accept", "text/event-stream")
			if last != "" {
				req.Header.Set("Last-Event-ID", last)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				f.fail(fmt.Sprintf("opening (resumption %d): %v %v", attempt, err, resp))
				return
			}
			r := bufio.NewReader(resp.Body)
			event, eventID := "", ""
			partial := false // inside an event
			var readErr error
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					readErr = err
					break
				}
				line = strings.TrimRight(line, "\r\n")
				partial = line != ""
				switch {
				case strings.HasPrefix(line, "id: "):
					eventID = strings.TrimPrefix(line, "id: ")
					last = eventID
				case strings.HasPrefix(line, "event: "):
					event = strings.TrimPrefix(line, "event: ")
				case line == "":
					f.mu.Lock()
					switch event {
					case "record":
						f.recs++
						f.ids = append(f.ids, eventID)
					case "done":
						f.done = true
					}
					done := f.done
					f.mu.Unlock()
					event, eventID = "", ""
					if done {
						resp.Body.Close()
						return
					}
				}
			}
			resp.Body.Close()
			if partial || readErr.Error() != "EOF" {
				f.fail(fmt.Sprintf("ended inside an event or with %v (resumption %d)", readErr, attempt))
				return
			}
			f.mu.Lock()
			f.resumed++
			f.mu.Unlock()
		}
		f.fail("resumed 50 times")
	}()
	return f
}

func (f *liveFollower) fail(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken, f.done = why, true
}

func (f *liveFollower) records() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recs
}

func (f *liveFollower) finished() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

func (f *liveFollower) result() (ids []string, resumed int, broken string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...), f.resumed, f.broken
}

// Connectors that piled up on one replica — the others were down when
// they connected — spread out once the others are up: the replica over
// its share asks the excess to move, a few at a time, and refuses their
// new tunnels so the balancer sends them elsewhere. No connector is away
// meanwhile, and no request through the balancer fails.
func TestConnectorsPiledOnOneReplicaSpreadOut(t *testing.T) {
	t.Parallel()
	ns := natsservertest.RunRandClientPortServer()
	t.Cleanup(ns.Shutdown)
	key := clusterKey(t)
	dash := gwCLI(t, key, "token", "create", "--dashboard")
	addrs := []string{freePort(t), freePort(t), freePort(t)}
	fast := []string{"--rebalance-every", "1s"}
	first := startReplicaOn(t, key, ns.ClientURL(), "r1", addrs[0], fast...)
	front := frontClient{addr: startNginxCluster(t, addrs), dash: dash,
		client: &http.Client{Timeout: clusterRequestTimeout + 10*time.Second}}
	names := []string{"alpha", "bravo", "charlie"}
	_, conns := connectThrough(t, key, "http://"+front.addr, names)
	front.waitReachable(t, names)
	held := front.holders
	if h := held(); h["alpha"] != first.id || h["bravo"] != first.id || h["charlie"] != first.id {
		t.Fatalf("with one replica up, the connectors are held by %v", h)
	}
	var paths []string
	for _, name := range names {
		paths = append(paths, "/api/clients/"+name+"/workflows")
	}
	load := front.hammer(paths)
	startReplicaOn(t, key, ns.ClientURL(), "r2", addrs[1], fast...)
	startReplicaOn(t, key, ns.ClientURL(), "r3", addrs[2], fast...)
	testkit.WaitFor(t, "one connector on each replica", func() error {
		h := held()
		per := map[string]int{}
		for _, name := range names {
			per[h[name]]++
		}
		if per["r1"] != 1 || per["r2"] != 1 || per["r3"] != 1 {
			return fmt.Errorf("held: %v", h)
		}
		return nil
	})
	before := load.sent()
	testkit.WaitUntil(t, "requests through nginx after the spread", func() bool { return load.sent() >= before+len(paths) })
	sent, failures := load.stop()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests through nginx failed while the connectors spread; the first: %s", len(failures), sent, strings.Join(failures[:min(5, len(failures))], "; "))
	}
	for i, c := range conns {
		if out := c.logs.String(); strings.Contains(out, "disconnected from gateway") {
			t.Errorf("connector %s was away while the connectors spread:\n%s", names[i], out)
		}
	}
	if !strings.Contains(first.p.logs.String(), "rebalancing: asking connectors to move") {
		t.Error("r1 did not log its rebalance")
	}
}
