package tunnel

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// More requests than the connector's stream limit (250) at once: those
// beyond it wait for a stream to end instead of failing, since the gateway
// has this one connection and no other to open.
func TestRequestsBeyondTheStreamLimitWait(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var inHandler atomic.Int64
	c, _ := pair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler.Add(1)
		<-release
		_, _ = io.WriteString(w, "ok")
	}))
	const n = 270
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://connector/slow", nil)
			resp, err := c.RoundTrip(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			errs <- err
		}()
	}
	testkit.WaitUntil(t, "the connector's 250 streams to be busy", func() bool { return inHandler.Load() == 250 })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a request beyond the stream limit failed: %v", err)
		}
	}
}
