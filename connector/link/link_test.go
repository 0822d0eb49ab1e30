package link

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

func TestBackoffGrowsToTheCapWithJitter(t *testing.T) {
	t.Parallel()
	one := func() float64 { return 0.999999 }
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for n, w := range want {
		if got := Backoff(n, time.Second, 30*time.Second, one).Round(time.Second); got != w*time.Second {
			t.Errorf("attempt %d: %s, want %ds", n, got, w)
		}
	}
	if got := Backoff(3, time.Second, 30*time.Second, func() float64 { return 0 }); got != 100*time.Millisecond {
		t.Errorf("floor: %s", got)
	}
	if got := Backoff(1000, time.Second, 30*time.Second, one); got > 30*time.Second {
		t.Errorf("overflow: %s", got)
	}
}

func TestReconnectsAfterTheGatewayDropsIt(t *testing.T) {
	t.Parallel()
	gw := newFakeGateway(t, 2) // the second attempt is refused
	out := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Options{Gateway: gw.URL, Name: "laptop", Token: "t", Out: out,
			Handler:    http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hi") }),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	}()
	first := gw.next(t, out)
	// Close reports the close frame failing on the connection it already
	// shut (shared/tunnel); what matters here is only that the link drops.
	_ = first.Close("gateway restarting")
	second := gw.next(t, out)
	req, _ := http.NewRequest("GET", "http://connector/x", nil)
	resp, err := second.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("request over the new link: %v %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	log := out.String()
	for _, want := range []string{`connected to ` + gw.URL + ` as "laptop"`, "disconnected from gateway", "retrying in", ": gateway refused the connection (503): gateway busy"} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q:\n%s", want, log)
		}
	}
	if strings.Count(log, "connected to") < 2 {
		t.Errorf("expected two connections:\n%s", log)
	}
}
