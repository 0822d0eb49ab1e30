package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/uncaged/workflow/shared/testkit"
)

// pair starts a gateway-like server that accepts one connector and a
// connector serving h; it returns the gateway's client.
func pair(t testing.TB, h http.Handler) (*Client, context.CancelFunc) {
	t.Helper()
	clients := make(chan *Client, 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ConnectPath || r.URL.Query().Get("name") != "laptop" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		ws, err := Accept(w, r)
		if err != nil {
			return
		}
		c, err := NewClient(ws)
		if err != nil {
			t.Error(err)
			return
		}
		clients <- c
	}))
	t.Cleanup(gw.Close)
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := Dial(ctx, gw.URL, "laptop", "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = Serve(ctx, ws, h, ServeOptions{}) // ends with the test
	}()
	t.Cleanup(func() { cancel(); <-served })
	select {
	case c := <-clients:
		return c, cancel
	case <-time.After(testkit.WaitBound):
		t.Fatal("no connection")
	}
	return nil, nil
}

func get(t *testing.T, c *Client, ctx context.Context, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://connector"+path, nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestRequestsRoundTripAndMultiplex(t *testing.T) {
	t.Parallel()
	c, _ := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Path", r.URL.RequestURI())
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Query().Get("q"), len(body))
	}))
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://connector/api/x?q=%d", i), bytes.NewReader(make([]byte, i*100)))
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusTeapot || string(b) != fmt.Sprintf("POST %d %d", i, i*100) || resp.Header.Get("X-Path") != fmt.Sprintf("/api/x?q=%d", i) {
				t.Errorf("response %d: %d %q %v", i, resp.StatusCode, b, resp.Header)
			}
		}(i)
	}
	wg.Wait()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestStreamingIsLiveAndCancellationReachesTheHandler(t *testing.T) {
	t.Parallel()
	handlerDone := make(chan error, 1)
	c, _ := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: record\ndata: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // stays open until the client goes away
		handlerDone <- r.Context().Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	resp := get(t, c, ctx, "/live")
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: record\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	cancel()
	select {
	case err := <-handlerDone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler context: %v", err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("cancelling the request did not reach the connector's handler")
	}
}

func TestLargeBodyStreamsIntact(t *testing.T) {
	t.Parallel()
	const size = 50 << 20
	c, _ := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return // the client went away; it checks what arrived
			}
		}
	}))
	resp := get(t, c, context.Background(), "/big")
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	want := sha256.New()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for sent := 0; sent < size; sent += len(buf) {
		want.Write(buf)
	}
	if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Fatal("body corrupted in transit")
	}
}

func TestConnectorGoneClosesTheClient(t *testing.T) {
	t.Parallel()
	c, stopConnector := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	stopConnector()
	select {
	case <-c.Done():
	case <-time.After(testkit.WaitBound):
		t.Fatal("client did not notice the connector leaving")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://connector/x", nil)
	if _, err := c.RoundTrip(req); err == nil {
		t.Fatal("round trip over a closed tunnel succeeded")
	}
}

func TestDialRejectionsAndURLs(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"token is for connector \"other\""}`, http.StatusForbidden)
	}))
	defer gw.Close()
	_, err := Dial(context.Background(), gw.URL, "laptop", "tok", nil)
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Status != 403 || !strings.Contains(rej.Message, `connector \"other\"`) {
		t.Fatalf("rejection = %v", err)
	}
	cases := map[string]string{
		"https://gw.example.com":          "wss://gw.example.com/ws/connect?name=lap+top",
		"http://127.0.0.1:8080/":          "ws://127.0.0.1:8080/ws/connect?name=lap+top",
		"wss://gw.example.com/prefix?x=1": "wss://gw.example.com/prefix/ws/connect?name=lap+top",
	}
	for in, want := range cases {
		got, err := ConnectURL(in, "lap top")
		if err != nil || got != want {
			t.Errorf("ConnectURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://x", "://", "http://", "gw.example.com"} {
		if _, err := ConnectURL(bad, "n"); err == nil {
			t.Errorf("ConnectURL(%q) accepted", bad)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/ws/connect", nil)
	if Offers(r) {
		t.Fatal("a request without subprotocols offers ours")
	}
	r.Header.Set("Sec-WebSocket-Protocol", "chat, "+Subprotocol)
	if !Offers(r) {
		t.Fatal("offered subprotocol not seen")
	}
}

func TestStoppingDrainsRequestsInFlight(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	c, stopConnector := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		fmt.Fprint(w, "finished")
	}))
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://connector/slow", nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	<-started
	stopConnector() // a shutdown while the request runs
	testkit.WaitUntil(t, "the connector's GOAWAY", func() bool { return c.cc.State().Closing })
	close(release)
	r := <-got
	if r.err != nil || r.body != "finished" {
		t.Fatalf("request in flight during shutdown: %q %v", r.body, r.err)
	}
	select {
	case <-c.Done():
	case <-time.After(testkit.WaitBound):
		t.Fatal("tunnel not closed after draining")
	}
}

// TestAConnectorsGoAwayClosesAnIdleTunnel: a connector that stops sends
// GOAWAY and waits for the gateway to close the connection. With nothing
// in flight the gateway's client closes it at once — here against a
// connector that never closes by itself, so only the gateway's close
// ends it (a real connector's server gives up after a second, which is
// how much later the connector was seen offline).
func TestAConnectorsGoAwayClosesAnIdleTunnel(t *testing.T) {
	t.Parallel()
	server, client := wsPair(t)
	peer := newWSConn(server, 0)
	closed := make(chan error, 1)
	go func() {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(peer, preface); err != nil || string(preface) != http2.ClientPreface {
			closed <- fmt.Errorf("client preface %q: %v", preface, err)
			return
		}
		fr := http2.NewFramer(peer, peer)
		if err := fr.WriteSettings(); err != nil {
			closed <- err
			return
		}
		for sentGoAway := false; ; {
			f, err := fr.ReadFrame()
			if err != nil {
				closed <- err // the gateway closed the connection
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					closed <- err
					return
				}
				if !sentGoAway {
					sentGoAway = true
					if err := fr.WriteGoAway(0, http2.ErrCodeNo, nil); err != nil {
						closed <- err
						return
					}
				}
			}
		}
	}()
	c, err := NewClient(client)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case err := <-closed:
		t.Fatalf("the connector's side ended before the gateway's client closed: %v", err)
	case <-time.After(testkit.WaitBound):
		t.Fatal("the gateway kept an idle tunnel open after the connector's GOAWAY")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://connector/x", nil)
	if _, err := c.RoundTrip(req); err == nil {
		t.Fatal("a request went out on a tunnel the connector is leaving")
	}
}
