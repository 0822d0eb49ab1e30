package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// TestRunStopsInOrderWhenItsContextEnds starts the gateway as the serve
// command does, with a tunnel connector and an original client online,
// then cancels: Run returns nil, both connectors were closed, the original
// client heard why, and the listener no longer accepts. A scrape of
// /metrics during the stop, once the connectors are closed and before the
// server stops answering, counts both as ended by the shutdown; the log
// says each went offline and ends with "gateway stopped".
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
	base := "http://" + ln.Addr().String()
	var duringStop map[string]*dto.MetricFamily
	scrapeDuringStop := func() {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Errorf("scrape during the stop: %v", err)
			return
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		if duringStop, err = p.TextToMetricFamilies(resp.Body); err != nil {
			t.Errorf("scrape during the stop: %v", err)
		}
	}
	go func() {
		ran <- Run(ctx, Config{Options: Options{Auth: a, Logger: logging.New(logs, 0)}, Listener: ln, beforeServerStops: scrapeDuringStop})
	}()
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
	expect(t, duringStop, map[string]float64{
		"uncaged_gateway_connector_disconnects_total reason shutdown": 2,
		"uncaged_gateway_connectors_online":                           0,
	})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	offline := map[string]int{}
	for _, line := range lines {
		var l struct{ Level, Msg, Connector string }
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Level != "INFO" {
			t.Errorf("log line %q: %v", line, err)
		}
		if l.Msg == "connector offline" {
			offline[l.Connector]++
		}
	}
	if offline["tunnelled"] != 1 || offline["original"] != 1 {
		t.Errorf("connector offline lines: %v, want one for each", offline)
	}
	var last struct {
		Msg        string
		DurationMS *float64 `json:"duration_ms"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Msg != "gateway stopped" || last.DurationMS == nil {
		t.Errorf("the last log line is %q, want gateway stopped with its duration", lines[len(lines)-1])
	}
}

// A stop that cannot wait for requests says which: clients that announced
// a body and sent a few bytes of it hold their requests (no body timeout
// here) past the stop's bound, and Run returns a *StopError naming them,
// also logged as the last line, instead of a bare deadline. The requests
// it cut off are logged too, before that last line: however many there
// are, "gateway stopped" is the stop's last word.
func TestAStopThatCannotWaitSaysForWhat(t *testing.T) {
	t.Parallel()
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "")
	if err != nil {
		t.Fatal(err)
	}
	for round, stuck := range []int{1, 2, 7} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		logs := &testkit.Buffer{}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		built := make(chan *Gateway, 1)
		go func() {
			ran <- Run(ctx, Config{Options: Options{Auth: a, Logger: logging.New(logs, 0), BodyTimeout: -1}, Listener: ln,
				shutdownTimeout: 100 * time.Millisecond, serving: func(g *Gateway) { built <- g }})
		}()
		g := <-built
		for range stuck {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }() // the gateway has cut it off already
			if _, err := io.WriteString(c, "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tok"); err != nil {
				t.Fatal(err)
			}
		}
		testkit.WaitUntil(t, "the logins to be in flight", func() bool {
			s := g.inFlight.stuck()
			return len(s) == 1 && s[0].Count == stuck
		})
		cancel()
		var stopErr *StopError
		want := fmt.Sprintf("%d request", stuck)
		if err := <-ran; !errors.As(err, &stopErr) || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "POST /api/gateway/login") {
			t.Fatalf("round %d: Run returned %v, want the %d requests it could not wait for", round, err, stuck)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		var last struct{ Level, Msg, Err string }
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Level != "ERROR" || last.Msg != "gateway stopped" || !strings.Contains(last.Err, "POST /api/gateway/login") {
			t.Fatalf("round %d: the last log line is %q", round, lines[len(lines)-1])
		}
		logged := 0
		for _, l := range lines {
			if strings.Contains(l, `"/api/gateway/login"`) {
				logged++
			}
		}
		if logged != stuck {
			t.Fatalf("round %d: %d of the %d cut-off requests logged before the stop's last line:\n%s", round, logged, stuck, logs.String())
		}
	}
}
