package tunnel

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsPair connects two WebSockets on loopback; the server end is returned
// first.
func wsPair(t *testing.T) (server, client *websocket.Conn) {
	t.Helper()
	accepted := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- ws
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	client, _, err := websocket.Dial(context.Background(), srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { _ = client.CloseNow(); _ = server.CloseNow() })
	return server, client
}

func TestWSConnCarriesMessagesAsOneStream(t *testing.T) {
	t.Parallel()
	server, client := wsPair(t)
	a, b := newWSConn(server, 0), newWSConn(client, 16)
	go func() {
		for _, part := range []string{"hello ", "", "tunnel ", "world"} {
			if _, err := b.Write([]byte(part)); err != nil {
				t.Error(err)
			}
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	got, err := io.ReadAll(a)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello tunnel world" {
		t.Fatalf("read %q", got)
	}
}

func TestWSConnRefusesATextMessage(t *testing.T) {
	t.Parallel()
	server, client := wsPair(t)
	a := newWSConn(server, serverReadBuffer)
	if err := client.Write(context.Background(), websocket.MessageText, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_, err := a.Read(make([]byte, 16))
	if err == nil || !strings.Contains(err.Error(), "unexpected MessageText message") {
		t.Fatalf("read a text message: %v", err)
	}
}

func TestWSConnKeepsTheReadLimit(t *testing.T) {
	t.Parallel()
	server, client := wsPair(t)
	server.SetReadLimit(1 << 10)
	a := newWSConn(server, serverReadBuffer)
	// The server refuses the message mid-way: the write's error is expected.
	go func() { _ = client.Write(context.Background(), websocket.MessageBinary, make([]byte, 4<<10)) }()
	if _, err := io.ReadAll(a); err == nil {
		t.Fatal("a message over the read limit was accepted")
	}
}

func TestWSConnRefusesDeadlines(t *testing.T) {
	t.Parallel()
	server, _ := wsPair(t)
	a := newWSConn(server, serverReadBuffer)
	if err := a.SetDeadline(time.Time{}); err != nil {
		t.Fatalf("clearing the deadline: %v", err)
	}
	for _, set := range []func(time.Time) error{a.SetDeadline, a.SetReadDeadline, a.SetWriteDeadline} {
		if err := set(time.Now().Add(time.Second)); !errors.Is(err, errDeadline) {
			t.Fatalf("setting a deadline: %v", err)
		}
	}
}

func TestCoalescedRunsStayUnderTheMessageCap(t *testing.T) {
	t.Parallel()
	server, client := wsPair(t)
	server.SetReadLimit(MaxMessage)
	a, b := newWSConn(server, 0), newCoalescingConn(newWSConn(client, 0), func() { _ = client.CloseNow() }, DefaultWriteTimeout)
	want := strings.Repeat("0123456789abcdef", 3*MaxMessage/16+5)
	go func() {
		if _, err := b.Write([]byte(want)); err != nil {
			t.Error(err)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	got, err := io.ReadAll(a)
	if err != nil || string(got) != want {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(want), err)
	}
}

func TestHandlerPanicsAndGoexitsReachTheServer(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	c, _ := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/panic":
			panic("handler bug")
		case "/goexit":
			runtime.Goexit()
		}
		_, _ = io.WriteString(w, "ok") // the client checks what arrives
	}))
	for _, path := range []string{"/abort", "/panic", "/goexit"} {
		req, _ := http.NewRequest(http.MethodGet, "http://connector"+path, nil)
		resp, err := c.RoundTrip(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Fatalf("%s: the request succeeded", path)
		}
	}
	// The tunnel and its workers carry on.
	resp := get(t, c, context.Background(), "/fine")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" || served.Load() != 4 {
		t.Fatalf("after the failures: %q, %d served", body, served.Load())
	}
}
