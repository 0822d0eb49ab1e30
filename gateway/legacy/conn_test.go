package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/shared/testkit"
)

// pair returns the gateway's Conn and the client's end of one WebSocket.
func pair(t *testing.T, opts Options) (*Conn, *websocket.Conn) {
	t.Helper()
	conns := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conns <- New(ws, opts)
	}))
	t.Cleanup(srv.Close)
	client, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws/connect?name=x&secret=s", nil)
	if err != nil {
		t.Fatal(err)
	}
	client.SetReadLimit(64 << 20)
	c := <-conns
	t.Cleanup(func() { _ = client.CloseNow(); _ = c.Close("test over") })
	return c, client
}

// readRequest reads the next request frame on the client's end.
func readRequest(t *testing.T, ws *websocket.Conn) RequestFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseRequest(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return f
}

func send(t *testing.T, ws *websocket.Conn, typ websocket.MessageType, v any) {
	t.Helper()
	data, ok := v.([]byte)
	if !ok {
		if s, isString := v.(string); isString {
			data = []byte(s)
		} else {
			data, _ = json.Marshal(v)
		}
	}
	if err := ws.Write(context.Background(), typ, data); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	resp *http.Response
	body string
	err  error
}

// roundTrip runs RoundTrip in the background.
func roundTrip(c *Conn, req *http.Request) <-chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := c.RoundTrip(req)
		r := result{resp: resp, err: err}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			r.body = string(b)
		}
		out <- r
	}()
	return out
}

func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testkit.WaitBound):
		t.Fatal("RoundTrip did not return")
		return result{}
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestRequestAndResponseFrames(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{ClientToken: func() string { return "tok-1" }})

	req, _ := http.NewRequest("GET", "http://connector/api/threads?workflow=solve&x=%2F", nil)
	req.Header.Add("Accept", "application/json")
	req.Header.Add("Accept", "text/plain")
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("X-Client-Token", "from-the-dashboard")
	res := roundTrip(c, req)
	f := readRequest(t, client)
	if !uuidRE.MatchString(f.ID) || f.Method != "GET" || f.Path != "/api/threads?workflow=solve&x=%2F" || f.Body != nil {
		t.Fatalf("request frame %+v", f)
	}
	if f.Headers["Accept"] != "application/json" || f.Headers["X-Client-Token"] != "tok-1" || f.Headers["Accept-Encoding"] != "" {
		t.Fatalf("headers %v", f.Headers)
	}
	send(t, client, websocket.MessageText, map[string]any{"id": f.ID, "status": 200.7, "body": `{"threads":[]}`, "headers": map[string]string{
		"content-type": "application/json", "content-length": "999", "x-multi": "a, b", "bad header": "x", "x-injected": "a\r\nset-cookie: y",
	}})
	r := wait(t, res)
	if r.err != nil || r.resp.StatusCode != 200 || r.resp.Status != "200 OK" || r.body != `{"threads":[]}` || r.resp.ContentLength != int64(len(r.body)) {
		t.Fatalf("response %+v %q %v", r.resp, r.body, r.err)
	}
	want := http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a, b"}}
	if fmt.Sprint(r.resp.Header) != fmt.Sprint(want) {
		t.Fatalf("response headers %v", r.resp.Header)
	}

	// A POST carries its body as text; an empty one is null.
	req, _ = http.NewRequest("POST", "http://connector/api/cas", strings.NewReader(`{"content":"héllo"}`))
	res = roundTrip(c, req)
	f = readRequest(t, client)
	if f.Method != "POST" || f.Body == nil || *f.Body != `{"content":"héllo"}` {
		t.Fatalf("POST frame %+v", f)
	}
	send(t, client, websocket.MessageText, map[string]any{"id": f.ID, "status": 201, "headers": map[string]string{}, "body": `{"hash":"X"}`})
	if r := wait(t, res); r.err != nil || r.resp.StatusCode != 201 || r.body != `{"hash":"X"}` {
		t.Fatalf("POST response %+v %v", r.resp, r.err)
	}
	req, _ = http.NewRequest("DELETE", "http://connector/api/cas/X", strings.NewReader(""))
	res = roundTrip(c, req)
	f = readRequest(t, client)
	if f.Body != nil {
		t.Fatalf("empty body sent as %q", *f.Body)
	}
	// HEAD and 204 answers carry no body whatever the client says.
	send(t, client, websocket.MessageText, map[string]any{"id": f.ID, "status": 204, "headers": map[string]string{}, "body": "ignored"})
	if r := wait(t, res); r.err != nil || r.resp.StatusCode != 204 || r.body != "" {
		t.Fatalf("204 response %+v %q %v", r.resp, r.body, r.err)
	}
}

func TestConcurrentRequestsAnsweredOutOfOrder(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{})
	const n = 20
	results := make([]<-chan result, n)
	for i := range n {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://connector/api/n/%d", i), nil)
		results[i] = roundTrip(c, req)
	}
	frames := make([]RequestFrame, n)
	ids := map[string]bool{}
	for i := range n {
		frames[i] = readRequest(t, client)
		ids[frames[i].ID] = true
	}
	if len(ids) != n {
		t.Fatalf("ids are not unique: %d distinct of %d", len(ids), n)
	}
	for i := n - 1; i >= 0; i-- { // answer last first
		send(t, client, websocket.MessageText, map[string]any{"id": frames[i].ID, "status": 200, "headers": map[string]string{}, "body": frames[i].Path})
	}
	for i := range n {
		r := wait(t, results[i])
		if r.err != nil || r.body != fmt.Sprintf("/api/n/%d", i) {
			t.Fatalf("request %d got %q %v", i, r.body, r.err)
		}
	}
	if c.Pending() != 0 || c.Dropped() != 0 {
		t.Fatalf("pending %d dropped %d", c.Pending(), c.Dropped())
	}
}

func TestCancellationForgetsTheRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var drops []string
	c, client := pair(t, Options{OnDrop: func(r string) { mu.Lock(); drops = append(drops, r); mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://connector/api/slow", nil)
	res := roundTrip(c, req)
	f := readRequest(t, client)
	cancel()
	if r := wait(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled request: %v", r.err)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending after cancel", c.Pending())
	}
	// The late answer is dropped; the connection still works.
	send(t, client, websocket.MessageText, map[string]any{"id": f.ID, "status": 200, "headers": map[string]string{}, "body": "late"})
	testkit.WaitUntil(t, "the late answer to be dropped", func() bool { return c.Dropped() == 1 })
	mu.Lock()
	if fmt.Sprint(drops) != "[unknown_id]" {
		t.Fatalf("drops %v", drops)
	}
	mu.Unlock()
	req, _ = http.NewRequest("GET", "http://connector/api/fast", nil)
	res = roundTrip(c, req)
	f = readRequest(t, client)
	send(t, client, websocket.MessageText, map[string]any{"id": f.ID, "status": 200, "headers": map[string]string{}, "body": "ok"})
	if r := wait(t, res); r.err != nil || r.body != "ok" {
		t.Fatalf("after cancel: %q %v", r.body, r.err)
	}
}

func TestInvalidFramesAreDroppedAndCounted(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	drops := map[string]int{}
	c, client := pair(t, Options{OnDrop: func(r string) { mu.Lock(); drops[r]++; mu.Unlock() }})
	req, _ := http.NewRequest("GET", "http://connector/api/x", nil)
	res := roundTrip(c, req)
	f := readRequest(t, client)
	for _, bad := range []string{
		`not json`, `null`, `[]`, `{"id":"` + f.ID + `"}`,
		`{"id":"` + f.ID + `","status":"200","headers":{},"body":""}`,
		`{"id":"` + f.ID + `","status":200,"headers":{"a":1},"body":""}`,
		`{"id":"` + f.ID + `","status":200,"headers":{},"body":null}`,
		`{"id":"","status":200,"headers":{},"body":""}`,
	} {
		send(t, client, websocket.MessageText, bad)
	}
	send(t, client, websocket.MessageBinary, `{"id":"`+f.ID+`","status":200,"headers":{},"body":"binary"}`)
	send(t, client, websocket.MessageText, `{"id":"nobody","status":200,"headers":{},"body":""}`)
	send(t, client, websocket.MessageText, `{"id":"`+f.ID+`","status":418,"headers":{},"body":"teapot"}`)
	if r := wait(t, res); r.err != nil || r.resp.StatusCode != 418 || r.body != "teapot" {
		t.Fatalf("valid answer after junk: %+v %v", r.resp, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if c.Dropped() != 10 || drops[DropInvalid] != 8 || drops[DropBinary] != 1 || drops[DropUnknownID] != 1 {
		t.Fatalf("dropped %d: %v", c.Dropped(), drops)
	}
}

func TestInvalidStatusIsAnError(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{})
	for _, status := range []any{99, 600, 0, -1, 1e300} {
		req, _ := http.NewRequest("GET", "http://connector/api/x", nil)
		res := roundTrip(c, req)
		f := readRequest(t, client)
		send(t, client, websocket.MessageText, map[string]any{"id": f.ID, "status": status, "headers": map[string]string{}, "body": ""})
		if r := wait(t, res); r.err == nil || !strings.Contains(r.err.Error(), "invalid status") {
			t.Fatalf("status %v: %+v %v", status, r.resp, r.err)
		}
	}
}

func TestSocketCloseFailsPendingRequests(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{})
	var results []<-chan result
	for range 3 {
		req, _ := http.NewRequest("GET", "http://connector/api/x", nil)
		results = append(results, roundTrip(c, req))
		readRequest(t, client)
	}
	if err := client.Close(websocket.StatusNormalClosure, "shutdown"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range results {
		if r := wait(t, ch); r.err == nil || !strings.Contains(r.err.Error(), "websocket closed") {
			t.Fatalf("pending request after close: %v", r.err)
		}
	}
	select {
	case <-c.Done():
	case <-time.After(testkit.WaitBound):
		t.Fatal("Done not closed")
	}
	req, _ := http.NewRequest("GET", "http://connector/api/x", nil)
	if _, err := c.RoundTrip(req); err == nil {
		t.Fatal("RoundTrip on a closed connection succeeded")
	}
}

func TestCloseTellsTheClientAndFailsPending(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{})
	req, _ := http.NewRequest("GET", "http://connector/api/x", nil)
	res := roundTrip(c, req)
	readRequest(t, client)
	closed := make(chan error, 1)
	go func() { _, _, err := client.Read(context.Background()); closed <- err }()
	if err := c.Close("replaced by a newer connection for x"); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, res); r.err == nil || !strings.Contains(r.err.Error(), "replaced") {
		t.Fatalf("pending after Close: %v", r.err)
	}
	err := <-closed
	if websocket.CloseStatus(err) != websocket.StatusGoingAway || !strings.Contains(err.Error(), "replaced by a newer connection") {
		t.Fatalf("client saw %v", err)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{ReadLimit: 1024, MaxBody: 10})
	req, _ := http.NewRequest("POST", "http://connector/api/x", strings.NewReader(strings.Repeat("x", 11)))
	if _, err := c.RoundTrip(req); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("big body: %v", err)
	}
	// Ping works while the read loop runs.
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	go func() { _, _, _ = client.Read(ctx) }() // the client must read to answer pings
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	send(t, client, websocket.MessageText, `{"id":"x","status":200,"headers":{},"body":"`+strings.Repeat("y", 2000)+`"}`)
	select {
	case <-c.Done():
	case <-time.After(testkit.WaitBound):
		t.Fatal("a frame over the read limit did not close the connection")
	}
}

func TestServeAnswersLikeTheOriginal(t *testing.T) {
	t.Parallel()
	c, client := pair(t, Options{ClientToken: func() string { return "tok" }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/panic":
			panic("boom")
		case "/api/slow":
			<-release
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %s token=%s", r.Method, r.URL.RequestURI(), body, r.Header.Get("X-Client-Token"))
	})
	go func() { _ = Serve(ctx, client, h) }() // its error is the test's end
	slowReq, _ := http.NewRequest("GET", "http://connector/api/slow", nil)
	slow := roundTrip(c, slowReq)
	req, _ := http.NewRequest("POST", "http://connector/api/echo?q=1", strings.NewReader("hi"))
	if r := wait(t, roundTrip(c, req)); r.err != nil || r.body != "POST /api/echo?q=1 hi token=tok" || r.resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("echo: %q %v", r.body, r.err)
	}
	req, _ = http.NewRequest("GET", "http://connector/api/panic", nil)
	if r := wait(t, roundTrip(c, req)); r.err != nil || r.resp.StatusCode != 502 || !strings.Contains(r.body, `"local fetch failed"`) {
		t.Fatalf("panic: %+v %q %v", r.resp, r.body, r.err)
	}
	close(release)
	if r := wait(t, slow); r.err != nil || r.body != "GET /api/slow  token=tok" {
		t.Fatalf("slow: %q %v", r.body, r.err)
	}
}
