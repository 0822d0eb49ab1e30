package server

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
)

// TestARequestFollowsAConnectorThatMovesUnderIt: the rule is that a
// request entering the cluster is answered by the connector wherever it
// is when the request arrives, and "offline" only when it is offline
// everywhere — not because it moved between the entry replica's look at
// the cluster and the request's arrival at the replica it looked up.
// That race happens in every rolling restart: the entry replica looks,
// the connector leaves the holder for another replica (the entry one or
// a third), and the forwarded request reaches a holder that no longer
// has it. The holder says so without reading the body; the entry replica,
// which has not answered its client yet, looks again and sends the
// request, body from its first byte, to where the connector is now.
//
// Here the move happens exactly in that window (a hook of the entry
// replica's), for requests with no body, small and large bodies, and a
// body beyond what the entry replica keeps to send again (a holder that
// turns a request away reads none of it, so it still goes whole).
func TestARequestFollowsAConnectorThatMovesUnderIt(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	entry := newReplica(t, ns.ClientURL(), "r1")
	holder := newReplica(t, ns.ClientURL(), "r2")
	third := newReplica(t, ns.ClientURL(), "r3")
	replicas := map[string]*fixture{"r1": entry, "r2": holder, "r3": third}

	// moves maps a connector to what moves it, run once by the entry
	// replica after its look and before its forward.
	moves := make(chan func(name string), 1)
	hook := func(name string) {
		select {
		case move := <-moves:
			move(name)
		default:
		}
	}
	entry.gw.beforeForward.Store(&hook)

	rng := rand.New(rand.NewPCG(7, 11))
	bodies := []struct {
		method string
		size   int
	}{
		{"GET", 0}, {"POST", 100}, {"PUT", 300 << 10}, {"POST", 3 << 20},
	}
	for i, tc := range bodies {
		for _, dest := range []string{"r1", "r3", "gone"} {
			name := fmt.Sprintf("bravo-%d-%s", i, dest)
			t.Run(fmt.Sprintf("%s %d bytes to %s", tc.method, tc.size, dest), func(t *testing.T) {
				stop := holder.connector(name, bodyEcho("r2"))
				entry.waitHeld(name, "r2")
				moves <- func(name string) {
					if dest == "gone" {
						stop()
					} else {
						replicas[dest].connector(name, bodyEcho(dest))
					}
					holder.waitStatus(name, presence.Offline)
				}
				body := make([]byte, tc.size)
				for j := range body {
					body[j] = byte('a' + rng.IntN(26))
				}
				before := metricValue(entry.scrape(""), "uncaged_gateway_proxy_bytes_total", "direction", "in")
				resp, answer := entry.do(tc.method, "/api/clients/"+name+"/threads", entry.dash, bytes.NewReader(body))
				if dest == "gone" {
					if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(answer, "connector offline: "+name) {
						t.Fatalf("a connector gone from the cluster: %d %s, want 503 offline", resp.StatusCode, answer)
					}
					return
				}
				want := fmt.Sprintf("%s %s %d %x", dest, tc.method, tc.size, sha256.Sum256(body))
				if resp.StatusCode != 200 || answer != want {
					t.Fatalf("after the move: %d %q, want 200 %q", resp.StatusCode, answer, want)
				}
				// Sent twice, the body is counted once, where it entered.
				after := metricValue(entry.scrape(""), "uncaged_gateway_proxy_bytes_total", "direction", "in")
				if after-before != float64(tc.size) {
					t.Errorf("bytes in on the entry replica: %v, want %d (the body once)", after-before, tc.size)
				}
			})
		}
	}
	if got := metricValue(entry.scrape(""), "uncaged_gateway_cluster_forwarded_requests_total", "result", "not_held"); got != float64(3*len(bodies)) {
		t.Errorf("requests the holder turned away: %v, want %v", got, 3*len(bodies))
	}
}

// bodyEcho is a connector's API that answers /api/threads with its
// replica, the method and the size and hash of the body it got, and
// anything else (a replica's request to move, at the test's end) with 404.
func bodyEcho(replica string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/threads" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %s %d %x", replica, r.Method, len(body), sha256.Sum256(body))
	})
}
