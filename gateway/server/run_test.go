package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// TestRunStopsInOrderWhenItsContextEnds starts the gateway as the serve
// command does, with a tunnel connector and an original client online,
// then cancels: Run returns nil, both connectors were closed, the original
// client heard why, and the listener no longer accepts.
func TestRunStopsInOrderWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Config{Options: Options{Auth: a, Logger: logging.New(logs, 0)}, Listener: ln})
	}()
	base := "http://" + ln.Addr().String()
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	online := func(name string) bool {
		req, _ := http.NewRequest("GET", base+"/api/gateway/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+dash)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			return false
		}
		return strings.Contains(b.String(), `"`+name+`"`) && strings.Contains(b.String(), "online")
	}

	tok, _ := a.Issue(auth.RoleConnector, "tunnelled", time.Hour)
	ws, err := tunnel.Dial(context.Background(), base, "tunnelled", tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	// The connector's own context never ends: only the gateway closes it.
	go func() {
		served <- tunnel.Serve(context.Background(), ws, http.NotFoundHandler(), tunnel.ServeOptions{})
	}()
	testkit.WaitUntil(t, "the tunnel connector to be online", func() bool { return online("tunnelled") })

	u := "ws://" + ln.Addr().String() + "/ws/connect?" + url.Values{"name": {"original"}, "secret": {"shared-secret"}}.Encode()
	orig, _, err := websocket.Dial(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orig.CloseNow() }()
	testkit.WaitUntil(t, "the original client to be online", func() bool { return online("original") })

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("Run did not return after its context ended")
	}
	select {
	case err := <-served:
		// The connector hears why, to log it.
		var closed *tunnel.ClosedError
		if !errors.As(err, &closed) || closed.Reason != shutdownReason {
			t.Fatalf("tunnel.Serve: %v, want the gateway's reason %q", err, shutdownReason)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("the tunnel connector was not closed")
	}
	// The original client reads until the close frame, which carries the
	// reason it logs.
	rctx, rcancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer rcancel()
	for {
		_, _, err := orig.Read(rctx)
		if err == nil {
			continue // a heartbeat
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Reason != shutdownReason {
			t.Fatalf("original client closed with %v, want reason %q", err, shutdownReason)
		}
		break
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the listener still accepts after Run returned")
	}
	for _, line := range []string{"gateway listening", "gateway shutting down"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs.String())
		}
	}
}
