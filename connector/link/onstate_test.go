package link

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/tunnel"
)

// TestOnStateFollowsTheLink: a refused first attempt is reported as
// retrying with the gateway's reason, the second attempt as connecting and
// then connected.
func TestOnStateFollowsTheLink(t *testing.T) {
	var mu sync.Mutex
	attempts := 0
	var held []*tunnel.Client
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		if n == 1 {
			http.Error(w, "token expired", http.StatusUnauthorized)
			return
		}
		ws, err := tunnel.Accept(w, r)
		if err != nil {
			return
		}
		c, _ := tunnel.NewClient(ws)
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
	}))
	defer gw.Close()

	type change struct{ state, detail string }
	changes := make(chan change, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Options{Gateway: gw.URL, Name: "laptop", Token: "t",
			Handler:    http.NotFoundHandler(),
			MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
			OnState: func(state, detail string) { changes <- change{state, detail} }})
	}()
	var got []change
	for len(got) == 0 || got[len(got)-1].state != StateConnected {
		got = append(got, <-changes)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("changes: %+v", got)
	}
	if got[0] != (change{StateConnecting, ""}) {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].state != StateRetrying || !strings.Contains(got[1].detail, "401") || !strings.Contains(got[1].detail, "token expired") {
		t.Errorf("after the refusal: %+v", got[1])
	}
	if got[2].state != StateConnecting || got[2].detail != got[1].detail {
		t.Errorf("second attempt: %+v", got[2])
	}
	mu.Lock()
	for _, c := range held {
		c.Close("test over")
	}
	mu.Unlock()
}
