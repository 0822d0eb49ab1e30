package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/gateway/internal/natstest"
)

// connectorAPI is the connector's real REST API on an empty storage root.
func connectorAPI(t *testing.T) http.Handler {
	return api.New(api.Options{Layout: storage.Layout{Root: t.TempDir()}})
}

// curl sends Expect: 100-continue by itself for bodies over 1 MB. The
// connector's 100 Continue passes through the gateway as what it is, an
// interim answer: the status the client gets is the connector's final one.
func TestExpectContinueKeepsTheConnectorsStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("alpha", connectorAPI(t))
	checkExpectContinue(t, f)
}

// The same through a replica that forwards to the one holding the
// connector.
func TestExpectContinueThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	r1.connector("alpha", connectorAPI(t))
	r2.waitHeld("alpha", "r1")
	checkExpectContinue(t, r2)
}

func checkExpectContinue(t *testing.T, f *fixture) {
	t.Helper()
	for _, c := range []struct {
		path, body string
		want       int
		contains   string
	}{
		{"/api/clients/alpha/threads", `{"workflow":"nope","prompt":"x"}`, 404, `"error":"workflow not found: nope"`},
		{"/api/clients/alpha/cas", `{"content":"hello"}`, 201, `"hash":`},
	} {
		req, _ := http.NewRequest("POST", f.srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+f.dash)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(string(body), c.contains) {
			t.Errorf("POST %s with Expect: 100-continue: %d %s, want %d", c.path, resp.StatusCode, body, c.want)
		}
	}
}
