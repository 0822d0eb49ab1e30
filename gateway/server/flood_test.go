package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// TestAPingFloodGetsTheConnectorClosed connects a fake connector with a
// valid token that writes raw HTTP/2 frames — its SETTINGS, then PINGs as
// fast as it can — and never reads: the gateway closes it, logs why, and
// shows it offline.
func TestAPingFloodGetsTheConnectorClosed(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	tok, _ := f.auth.Issue(auth.RoleConnector, "flood", time.Hour)
	ws, err := tunnel.Dial(context.Background(), f.srv.URL, "flood", tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.CloseNow() }()
	fr := http2.NewFramer(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("flood", presence.Online)
	// The flood runs beside the test, which only waits for its outcome; a
	// gateway that keeps answering would block the writer in the end.
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for range 100_000 {
			if _, online, _ := f.gw.Presence().Get("flood"); !online || fr.WritePing(false, [8]byte{7}) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = ws.CloseNow(); <-flooded })
	f.waitStatus("flood", presence.Offline)
	testkit.WaitUntil(t, "the reason to be logged", func() bool {
		return strings.Contains(logs.String(), `msg="connector dropped" connector=flood reason="tunnel: too many PING or SETTINGS frames from the connector`)
	})
}
