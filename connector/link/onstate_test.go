package link

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOnStateFollowsTheLink: a refused first attempt is reported as
// retrying with the gateway's reason, the second attempt as connecting and
// then connected.
func TestOnStateFollowsTheLink(t *testing.T) {
	t.Parallel()
	gw := newFakeGateway(t, 1)
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
	if got[1].state != StateRetrying || !strings.Contains(got[1].detail, "503") || !strings.Contains(got[1].detail, "gateway busy") {
		t.Errorf("after the refusal: %+v", got[1])
	}
	if got[2].state != StateConnecting || got[2].detail != got[1].detail {
		t.Errorf("second attempt: %+v", got[2])
	}
}
