package server

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
)

// TestUnknownConnectorsAreNotYetConnectedDuringRestartGrace checks that,
// right after a start, a name nobody has seen is 503 "not connected
// (yet)" with Retry-After (its connector may still be backing off), and
// 404 once RestartGrace is over; the clock is the test's.
func TestUnknownConnectorsAreNotYetConnectedDuringRestartGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var elapsed atomic.Int64 // since started, in ns; handlers read it
	f.gw.started = started
	f.gw.now = func() time.Time { return started.Add(time.Duration(elapsed.Load())) }
	disconnect := f.connector("laptop", echoAPI("laptop"))

	for _, tc := range []struct {
		after      time.Duration
		status     int
		body       string
		retryAfter string
	}{
		{0, 503, `{"error":"connector nobody is not connected (yet): the gateway started 0s ago"}`, "5"},
		{12700 * time.Millisecond, 503, `{"error":"connector nobody is not connected (yet): the gateway started 12s ago"}`, "5"},
		{RestartGrace - time.Nanosecond, 503, `{"error":"connector nobody is not connected (yet): the gateway started 29s ago"}`, "5"},
		{RestartGrace, 404, `{"error":"connector not found: nobody"}`, ""},
		{time.Hour, 404, `{"error":"connector not found: nobody"}`, ""},
	} {
		elapsed.Store(int64(tc.after))
		for _, prefix := range []string{"/api/clients/", "/api/agents/"} {
			resp, body := f.do("GET", prefix+"nobody/threads", f.dash, nil)
			if resp.StatusCode != tc.status || body != tc.body+"\n" || resp.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("%s after %s: %d %q Retry-After %q; want %d %q Retry-After %q",
					prefix, tc.after, resp.StatusCode, body, resp.Header.Get("Retry-After"), tc.status, tc.body, tc.retryAfter)
			}
		}
	}

	// The grace is only for names nobody knows: a connected connector is
	// served, and one that went offline is "offline", as ever.
	elapsed.Store(0)
	if resp, body := f.do("GET", "/api/clients/laptop/workflows", f.dash, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("connected connector during the grace: %d %s", resp.StatusCode, body)
	}
	disconnect()
	f.waitStatus("laptop", presence.Offline)
	resp, body := f.do("GET", "/api/clients/laptop/workflows", f.dash, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || body != `{"error":"connector offline: laptop"}`+"\n" || resp.Header.Get("Retry-After") != offlineRetryAfter {
		t.Fatalf("offline connector during the grace: %d %q Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
}
