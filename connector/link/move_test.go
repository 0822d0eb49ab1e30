package link

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// askToMove sends the move request over c, as a stopping replica does.
func askToMove(t *testing.T, c *tunnel.Client) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://connector"+tunnel.MovePath, nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatalf("move request: %v", err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("move answer %d: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, body
}

// Asked to move, a connector dials again and answers once the new tunnel
// is up; the old one goes on serving the request in flight on it until
// the gateway closes it, and that close is no disconnection.
func TestAMoveConnectsBeforeTheOldTunnelCloses(t *testing.T) {
	t.Parallel()
	gw := newFakeGateway(t)
	out := &testkit.Buffer{}
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Options{Gateway: gw.URL, Name: "laptop", Token: "t", Out: out,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					entered <- struct{}{}
					<-release
				}
				_, _ = io.WriteString(w, "answered") // the test reads what arrives
			}),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	}()
	old := gw.next(t, out)
	slow := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://connector/slow", nil)
		resp, err := old.RoundTrip(req)
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- string(b)
	}()
	<-entered
	if code, body := askToMove(t, old); code != http.StatusOK || body["moved"] != true {
		t.Fatalf("move answered %d %v", code, body)
	}
	moved := gw.next(t, out)
	req, _ := http.NewRequest("GET", "http://connector/x", nil)
	if resp, err := moved.RoundTrip(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request over the new tunnel: %v %v", resp, err)
	}
	close(release)
	if got := <-slow; got != "answered" {
		t.Fatalf("the request in flight on the old tunnel got %q", got)
	}
	_ = old.Close("moved to replica b") // the connector may close its side first
	req, _ = http.NewRequest("GET", "http://connector/x", nil)
	if resp, err := moved.RoundTrip(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request over the new tunnel after the old one closed: %v %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	log := out.String()
	if !strings.Contains(log, "moved to another gateway replica") || strings.Contains(log, "disconnected") || strings.Count(log, "connected to") != 1 {
		t.Fatalf("output:\n%s", log)
	}
}

// A move that cannot reach another replica (every dial refused) says why,
// and the connector stays on the tunnel it has.
func TestAMoveThatCannotConnectKeepsTheTunnel(t *testing.T) {
	t.Parallel()
	gw := newFakeGateway(t, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	out := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Options{Gateway: gw.URL, Name: "laptop", Token: "t", Out: out,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") })})
	}()
	c := gw.next(t, out)
	mctx, mcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer mcancel()
	req, _ := http.NewRequestWithContext(mctx, http.MethodPost, "http://connector"+tunnel.MovePath, nil)
	resp, err := c.RoundTrip(req)
	switch {
	case err == nil:
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "gateway busy") {
			t.Fatalf("move answered %d %s", resp.StatusCode, b)
		}
	case mctx.Err() == nil:
		t.Fatalf("move request: %v", err)
	}
	testkit.WaitUntil(t, "the connector to say it could not move", func() bool {
		return strings.Contains(out.String(), "asked to move to another gateway replica, but could not")
	})
	req, _ = http.NewRequest("GET", "http://connector/x", nil)
	if resp, err := c.RoundTrip(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request over the tunnel it kept: %v %v", resp, err)
	}
	req, _ = http.NewRequest("GET", "http://connector"+tunnel.MovePath, nil)
	if resp, err := c.RoundTrip(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET of the move path: %v %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
