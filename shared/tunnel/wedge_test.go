package tunnel

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"

	"github.com/uncaged/workflow/shared/testkit"
)

// socketBuffer pins the kernel's buffers on both ends of a fake
// connector's TCP connection (the gateway's send buffer, the connector's
// receive buffer). Left alone, Linux grows a loopback send buffer to
// tcp_wmem's maximum (4 MiB here) while the peer reads nothing, so the
// kernel could still take a "full" queue of maxPending bytes: Close then
// flushed it, rightly reported no stall, and the test that expected one
// failed about 1 run in 20. Pinned, the kernel holds at most a few times
// this (Linux doubles it for its bookkeeping), far under maxPending, so a
// full queue is one that can never be delivered.
const socketBuffer = 32 << 10

// pinnedListener pins the send buffer of each connection it accepts.
type pinnedListener struct{ net.Listener }

func (l pinnedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := c.(*net.TCPConn).SetWriteBuffer(socketBuffer); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// fakeConnector accepts one connection as the gateway does, with the given
// write timeout, and dials it as a connector that speaks raw HTTP/2 frames
// (written with fr) and never reads anything. Both ends' socket buffers are
// pinned (see socketBuffer).
func fakeConnector(t *testing.T, writeTimeout time.Duration) (*Client, *http2.Framer) {
	t.Helper()
	clients := make(chan *Client, 1)
	gw := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := Accept(w, r)
		if err != nil {
			return
		}
		c, err := newClient(ws, writeTimeout)
		if err != nil {
			t.Error(err)
			return
		}
		clients <- c
	}))
	gw.Listener = pinnedListener{gw.Listener}
	gw.Start()
	t.Cleanup(gw.Close)
	dialer := &net.Dialer{}
	pinned := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := c.(*net.TCPConn).SetReadBuffer(socketBuffer); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}}}
	ws, _, err := websocket.Dial(context.Background(), gw.URL+ConnectPath, &websocket.DialOptions{HTTPClient: pinned, Subprotocols: []string{Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil)
	c := wait(t, "the gateway to accept the fake connector", clients)
	t.Cleanup(func() { _ = ws.CloseNow(); _ = c.Close("test over") })
	return c, fr
}

// openWindows is the server preface of a connector that lets the gateway
// send as much as it likes.
func openWindows(t *testing.T, fr *http2.Framer) {
	t.Helper()
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
}

// zeros is an endless request body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// postForever sends an endless POST over c; the channel gets its result.
func postForever(c *Client) <-chan error {
	res := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://connector/api/cas", zeros{})
		resp, err := c.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		res <- err
	}()
	return res
}

// waitStuck waits until the gateway's side of c holds a full queue behind
// a send in progress. With the socket buffers pinned (see socketBuffer)
// that queue can never be delivered to a connector that does not read:
// the connector has stopped taking data.
func waitStuck(t *testing.T, c *Client) {
	t.Helper()
	testkit.WaitUntil(t, "the gateway's queue to fill", func() bool {
		c.conn.mu.Lock()
		defer c.conn.mu.Unlock()
		return len(c.conn.pending) >= maxPending && c.conn.sending
	})
}

func wait[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testkit.WaitBound):
		t.Fatalf("gave up after %s waiting for %s", testkit.WaitBound, what)
	}
	var zero T
	return zero
}

// Serial, as the next test: it fills megabytes of socket buffers, and has
// failed (the queue never full, or the stall never reported) on a loaded
// machine even alone; it is not to compete with the other tests as well.
func TestCloseReturnsWhenTheConnectorNeverReads(t *testing.T) {
	c, fr := fakeConnector(t, 0) // no watchdog: only Close is tested
	openWindows(t, fr)
	posted := postForever(c)
	waitStuck(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	closed := make(chan struct{})
	// What is tested is that Close returns, not how the handshake went.
	go func() { _ = c.Close("replaced by a newer connection for laptop"); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close is held by a connector that does not read")
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if err := wait(t, "the request in flight to fail", posted); err == nil {
		t.Fatal("the request in flight succeeded")
	}
	// What Close left to the background ends too: the queue could not be
	// flushed, so the carrier was aborted.
	testkit.WaitUntil(t, "the close to give up on the queue", func() bool { return errors.Is(c.Err(), errStalled) })
}

func TestAConnectorThatStopsTakingDataIsDropped(t *testing.T) {
	c, fr := fakeConnector(t, 100*time.Millisecond)
	openWindows(t, fr)
	posted := postForever(c)
	wait(t, "the tunnel to be dropped", c.Done())
	if err := wait(t, "the request in flight to fail", posted); err == nil {
		t.Fatal("the request in flight succeeded")
	}
	testkit.WaitUntil(t, "the stall to be reported", func() bool { return errors.Is(c.Err(), errStalled) })
	req, _ := http.NewRequest(http.MethodGet, "http://connector/api/healthz", nil)
	if _, err := c.RoundTrip(req); err == nil {
		t.Fatal("a request over a dropped tunnel succeeded")
	}
}

func TestControlFrameFloodsCloseTheTunnel(t *testing.T) {
	t.Parallel()
	for _, flood := range []struct {
		name  string
		write func(*http2.Framer) error
	}{
		{"PING", func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{1}) }},
		{"SETTINGS", func(fr *http2.Framer) error { return fr.WriteSettings() }},
	} {
		t.Run(flood.name, func(t *testing.T) {
			c, fr := fakeConnector(t, DefaultWriteTimeout)
			if err := fr.WriteSettings(); err != nil {
				t.Fatal(err)
			}
			// Far more than the bucket holds, and stop once cut off.
		send:
			for range 20 * controlBurst {
				select {
				case <-c.Done():
					break send
				default:
				}
				if flood.write(fr) != nil {
					break
				}
			}
			wait(t, "the tunnel to be closed", c.Done())
			if err := c.Err(); !errors.Is(err, errControlFlood) {
				t.Fatalf("Err() = %v", err)
			}
		})
	}
}

// TestFrameInspectorFollowsFramesAcrossReads feeds the inspector a stream
// of frames in pieces of every size, with payloads that look like PING
// headers: it counts exactly the PING and SETTINGS frames that ask for an
// answer.
func TestFrameInspectorFollowsFramesAcrossReads(t *testing.T) {
	t.Parallel()
	var stream bytes.Buffer
	fr := http2.NewFramer(&stream, nil)
	fakePing := []byte{0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}))
	check(fr.WriteSettingsAck())
	check(fr.WriteData(1, false, bytes.Repeat(fakePing, 2000))) // 18,000 bytes
	check(fr.WritePing(true, [8]byte{}))
	check(fr.WriteWindowUpdate(0, 10))
	check(fr.WriteRawFrame(0x42, 0, 0, bytes.Repeat(fakePing, 3))) // an unknown type
	for range controlBurst - 2 {
		check(fr.WritePing(false, [8]byte{}))
	}
	counted := controlBurst - 1 // the SETTINGS and the PINGs
	whole := stream.Bytes()

	frozen := time.Unix(1700000000, 0)
	for _, piece := range []int{len(whole), 1, 2, 8, 9, 10, 17, 4096, 0} {
		f := frameInspector{now: func() time.Time { return frozen }}
		for rest := whole; len(rest) > 0; {
			n := piece
			if n == 0 {
				n = 1 + rand.IntN(40)
			}
			n = min(n, len(rest))
			if err := f.inspect(rest[:n]); err != nil {
				t.Fatalf("pieces of %d: %v", piece, err)
			}
			rest = rest[n:]
		}
		if used := controlBurst - int(f.tokens); used != counted || f.skip != 0 || f.nhdr != 0 {
			t.Fatalf("pieces of %d: %d frames counted (want %d), skip %d, nhdr %d", piece, used, counted, f.skip, f.nhdr)
		}
		// One more goes, the next is over the limit, and time refills.
		var more bytes.Buffer
		check(http2.NewFramer(&more, nil).WritePing(false, [8]byte{}))
		if err := f.inspect(more.Bytes()); err != nil {
			t.Fatalf("the last token: %v", err)
		}
		if err := f.inspect(more.Bytes()); !errors.Is(err, errControlFlood) {
			t.Fatalf("over the limit: %v", err)
		}
		frozen = frozen.Add(time.Second)
		f.skip = 0 // the stream ends with the frame refused
		if err := f.inspect(more.Bytes()); err != nil {
			t.Fatalf("after a second: %v", err)
		}
	}
}
