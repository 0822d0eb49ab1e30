package e2e

import (
	"bufio"
	"encoding/json"
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

// credEndDeadline is how long after a credential ends what it opened may
// still be open: the gateway promises 5 s.
const credEndDeadline = 5 * time.Second

// credStream is a dashboard live stream read in the background, line by
// line, until it ends.
type credStream struct {
	mu      sync.Mutex
	lines   []string
	err     error
	endedAt time.Time
	started chan struct{} // closed at the first line
	ended   chan struct{}
}

// openCredStream opens GET url with req prepared by put and reads it in
// the background; it returns once the first line has arrived.
func openCredStream(t *testing.T, url string, put func(*http.Request)) *credStream {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	put(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	s := &credStream{started: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		r := bufio.NewReader(resp.Body)
		first := true
		for {
			line, err := r.ReadString('\n')
			s.mu.Lock()
			if line != "" {
				s.lines = append(s.lines, strings.TrimRight(line, "\n"))
			}
			if err != nil {
				s.endedAt = time.Now()
				if err.Error() != "EOF" {
					s.err = err
				}
			}
			s.mu.Unlock()
			if first && line != "" {
				first = false
				close(s.started)
			}
			if err != nil {
				if first {
					close(s.started)
				}
				return
			}
		}
	}()
	<-s.started
	return s
}

// waitEnd waits for the stream to end, at most credEndDeadline after
// since, and returns how long after since it ended.
func (s *credStream) waitEnd(t *testing.T, what string, since time.Time) time.Duration {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(time.Until(since.Add(credEndDeadline))):
		t.Fatalf("%s: still open %v after its token ended", what, credEndDeadline)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedAt.Sub(since)
}

// text is what the stream delivered, and how reading it ended.
func (s *credStream) text() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n"), s.err
}

func (s *credStream) isOpen() bool {
	select {
	case <-s.ended:
		return false
	default:
		return true
	}
}

// Revoking a dashboard token ends, within 5 s, every live stream it
// opened — through a bearer header, the session cookie of a login made
// with it, or ?key= — with an "error" event saying so and a clean end;
// a stream of another token stays open.
func TestRevokingADashboardTokenEndsItsLiveStreams(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("laptop", map[string]string{"slow": "slow.esm.js"})
	gate := filepath.Join(t.TempDir(), "gate")
	// Held at its second step until the test is over.
	id := startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	live := "http://" + g.front + "/api/clients/laptop/threads/" + id + "/live"

	first := createToken(t, g.key, "--dashboard", "--note", "first")
	second := createToken(t, g.key, "--dashboard", "--note", "second")
	req, _ := http.NewRequest("POST", "http://"+g.front+"/api/gateway/login", strings.NewReader(`{"token":"`+second.Token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "uncaged_session" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("login: %d, no cookie", resp.StatusCode)
	}

	bearer := openCredStream(t, live, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+first.Token) })
	byKey := openCredStream(t, live+"?key="+first.Token, func(*http.Request) {})
	session := openCredStream(t, live, func(r *http.Request) { r.AddCookie(cookie) })
	kept := openCredStream(t, live, func(r *http.Request) { r.Header.Set("Authorization", "bearer "+g.dash) })

	gwCLI(t, g.key, "token", "revoke", first.ID)
	revokedAt := time.Now()
	for what, s := range map[string]*credStream{"the bearer stream": bearer, "the ?key= stream": byKey} {
		took := s.waitEnd(t, what, revokedAt)
		t.Logf("%s ended %v after `token revoke` returned", what, took.Round(time.Millisecond))
		body, err := s.text()
		if err != nil || !strings.Contains(body, "event: error\ndata: {\"error\":\"token revoked\",\"reason\":\"revoked\"}") {
			t.Fatalf("%s: read error %v, body:\n%s", what, err, body)
		}
	}
	if !session.isOpen() || !kept.isOpen() {
		t.Fatal("the streams of the other tokens ended with the revoked one")
	}

	gwCLI(t, g.key, "token", "revoke", second.ID)
	revokedAt = time.Now()
	took := session.waitEnd(t, "the cookie session's stream", revokedAt)
	t.Logf("the cookie session's stream ended %v after `token revoke` returned", took.Round(time.Millisecond))
	if body, err := session.text(); err != nil || !strings.Contains(body, `"reason":"revoked"`) {
		t.Fatalf("the cookie session's stream: read error %v, body:\n%s", err, body)
	}
	if !kept.isOpen() {
		t.Fatal("the stream of the token not revoked ended")
	}
}

// A connector whose token was made with --ttl is disconnected within 5 s
// of the token's expiry and shown offline; it says why, its reconnection
// is refused as expired, and it stops with the exit code of a refused
// token.
func TestAConnectorIsDisconnectedWhenItsTokenExpires(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	// Long enough for the connector to come online on a loaded machine.
	out := gwCLI(t, g.key, "token", "create", "--json", "--connector", "laptop", "--ttl", "10s")
	var tok struct {
		Token   string
		Expires time.Time
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Expires.IsZero() {
		t.Fatalf("token create --json: %q (%v)", out, err)
	}
	p := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + engineRoot(t), "UNCAGED_WORKFLOW_TOKEN=" + tok.Token},
		"uncaged-workflow", "connect", "--name", "laptop", "--gateway", "http://"+g.front)
	g.waitStatus("laptop", "online")
	if time.Now().After(tok.Expires) {
		t.Fatal("the connector came online after its token expired: the test proves nothing")
	}
	deadline := tok.Expires.Add(credEndDeadline)
	for g.endpoints()["laptop"] != "offline" {
		if time.Now().After(deadline) {
			t.Fatalf("laptop still %q %v after its token expired", g.endpoints()["laptop"], credEndDeadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("laptop shown offline %v after its token expired", time.Since(tok.Expires).Round(time.Millisecond))
	expiredAt := tok.Expires.UTC().Format(time.RFC3339)
	waitLogs(t, p, "laptop", "closed by the gateway: token expired at "+expiredAt,
		"gateway refused the connection (401): token expired at "+expiredAt+" [expired]")
	if code := p.exitCode(t); code != 11 {
		t.Fatalf("connect exited %d, want 11 (the token refused):\n%s", code, p.logs.String())
	}
}

// In a cluster, a live stream opened on one replica to a connector held
// by another ends within 5 s of its token's revocation, on the shared
// database, with the same "error" event.
func TestRevokingADashboardTokenEndsItsStreamThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	ns := natsservertest.RunRandClientPortServer()
	t.Cleanup(ns.Shutdown)
	key := clusterKey(t)
	holder := startReplica(t, key, ns.ClientURL(), "holder")
	front := startReplica(t, key, ns.ClientURL(), "front")
	root := engineRoot(t)
	add(t, root, "slow", "slow.esm.js")
	tok := createToken(t, key, "--connector", "alpha")
	alpha := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok.Token},
		"uncaged-workflow", "connect", "--name", "alpha", "--gateway", "http://"+holder.addr)
	stopTogether(t, alpha)
	dash := createToken(t, key, "--dashboard")
	testkit.WaitUntil(t, "the front replica to list alpha online on the holder", func() bool {
		req, _ := http.NewRequest("GET", "http://"+front.addr+"/api/gateway/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+dash.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eps []clusterEndpoint
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&eps) != nil {
			return false
		}
		for _, e := range eps {
			if e.Name == "alpha" && e.Status == "online" && e.Replica == "holder" {
				return true
			}
		}
		return false
	})
	gate := filepath.Join(t.TempDir(), "gate")
	id := startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })

	s := openCredStream(t, "http://"+front.addr+"/api/clients/alpha/threads/"+id+"/live", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+dash.Token)
	})
	gwCLI(t, key, "token", "revoke", dash.ID)
	revokedAt := time.Now()
	took := s.waitEnd(t, "the stream through the front replica", revokedAt)
	t.Logf("the stream through the front replica ended %v after `token revoke` returned", took.Round(time.Millisecond))
	if body, err := s.text(); err != nil || !strings.Contains(body, "event: error\ndata: {\"error\":\"token revoked\",\"reason\":\"revoked\"}") {
		t.Fatalf("read error %v, body:\n%s", err, body)
	}
}
