package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// stopped sends p SIGSTOP; when the test ends it is continued and killed
// so that no stopped process outlives it.
func stopped(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.endSig = syscall.SIGKILL // SIGTERM would wait for it to go on
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // SIGKILL follows: it ends the process either way
		p.stop(syscall.SIGKILL)
	})
}

// jsonError says whether body is the gateway's {"error": "..."}.
func jsonError(body []byte) bool {
	var e struct{ Error string }
	return json.Unmarshal(body, &e) == nil && e.Error != ""
}

// TestWedgedConnectorIsDroppedAndItsNameFreed stops a connector's process
// (SIGSTOP) and sends it large POSTs, so that the gateway's writes to it
// can no longer drain. Within the heartbeat window (1 s here) the name
// shows offline, requests fail at once with JSON errors, a replacement
// for the name is online while the old process is still stopped, and once
// the replacement is killed the name shows offline again.
func TestWedgedConnectorIsDroppedAndItsNameFreed(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	old, _ := g.connector("wedge", nil)
	stopped(t, old)

	// Large POSTs: more than the tunnel and the sockets can hold for a
	// process that does not read.
	const posts = 6
	body := bytes.Repeat([]byte("x"), 6<<20)
	type result struct {
		status int
		body   []byte
		err    error
	}
	results := make(chan result, posts)
	// Well under the gateway's request timeout (60 s), which would answer
	// 504 on its own.
	client := &http.Client{Timeout: 30 * time.Second}
	for range posts {
		go func() {
			req, _ := http.NewRequest("POST", "http://"+g.front+"/api/clients/wedge/cas", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+g.dash)
			resp, err := client.Do(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			results <- result{status: resp.StatusCode, body: b}
		}()
	}

	g.waitStatus("wedge", "offline")
	fast := &http.Client{Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", "http://"+g.front+"/api/clients/wedge/workflows", nil)
	req.Header.Set("Authorization", "Bearer "+g.dash)
	resp, err := fast.Do(req)
	if err != nil {
		t.Fatalf("a request for the wedged name: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !jsonError(b) {
		t.Fatalf("a request for the wedged name: %d %s", resp.StatusCode, b)
	}
	// The POSTs in flight end with the gateway's JSON errors (a client
	// may also see its upload cut short), not with the request timeout.
	for range posts {
		r := <-results
		if r.err == nil && (r.status != 502 && r.status != 503 || !jsonError(r.body)) {
			t.Fatalf("a POST to the wedged connector: %d %s", r.status, r.body)
		}
		if r.err != nil {
			t.Logf("a POST to the wedged connector: %v", r.err)
		}
	}

	// A replacement takes the name while the old process is still stopped.
	replacement, _ := g.connector("wedge", nil)
	if resp, body := g.do("GET", "/api/clients/wedge/workflows", ""); resp.StatusCode != 200 {
		t.Fatalf("through the replacement: %d %s", resp.StatusCode, body)
	}
	replacement.stop(syscall.SIGKILL)
	g.waitStatus("wedge", "offline")
}
