package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// dialInstance dials name as the given instance (asking to take over when
// takeover), with a token for name.
func (f *fixture) dialInstance(name, instance string, takeover bool) (*tunnelConn, error) {
	f.t.Helper()
	tok, _ := f.auth.Issue(auth.RoleConnector, name, time.Hour)
	h := http.Header{tunnel.InstanceHeader: {instance}}
	if takeover {
		h.Set(tunnel.TakeoverHeader, "1")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := tunnel.Dial(ctx, f.srv.URL, name, tok, h)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &tunnelConn{ended: make(chan error, 1)}
	go func() { c.ended <- tunnel.Serve(ctx, ws, echoAPI(name+"/"+instance), tunnel.ServeOptions{}) }()
	f.t.Cleanup(func() {
		cancel()
		// How the tunnel ended is closedWith's to test; here it is only
		// waited for, and noted.
		if err := <-c.ended; err != nil {
			f.t.Logf("%s/%s: %v", name, instance, err)
		}
	})
	return c, nil
}

// tunnelConn is a connector's side of a tunnel: ended has Serve's error.
type tunnelConn struct{ ended chan error }

// closedWith waits for the gateway to close c and returns its reason.
func (c *tunnelConn) closedWith(t *testing.T) string {
	t.Helper()
	select {
	case err := <-c.ended:
		c.ended <- err // for the cleanup
		var closed *tunnel.ClosedError
		if !errors.As(err, &closed) {
			t.Fatalf("the tunnel ended with %v, not a reason", err)
		}
		return closed.Reason
	case <-time.After(testkit.WaitBound):
		t.Fatal("the tunnel was not closed")
		return ""
	}
}

type conflictAnswer struct {
	Error, Reason string
	Holder        struct {
		Instance, Address string
		Since             int64
	}
}

func conflictOf(t *testing.T, err error) conflictAnswer {
	t.Helper()
	var rej *tunnel.RejectedError
	if !errors.As(err, &rej) || rej.Status != http.StatusConflict {
		t.Fatalf("want a 409, got %v", err)
	}
	var a conflictAnswer
	if err := json.Unmarshal([]byte(rej.Message), &a); err != nil {
		t.Fatalf("409 body %q: %v", rej.Message, err)
	}
	return a
}

// One name, one instance: the same instance reconnecting replaces its old
// connection; another is refused (409, naming the holder) unless it asks
// to take over, and then the holder is told who took its place. Every
// refusal and replacement is logged; the endpoints list shows the instance.
func TestOneInstancePerConnectorName(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	first, err := f.dialInstance("m1", "inst-a", false)
	if err != nil {
		t.Fatal(err)
	}
	f.waitStatus("m1", presence.Online)
	if _, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); !strings.Contains(body, `"instance":"inst-a"`) {
		t.Fatalf("endpoints: %s", body)
	}

	a := conflictOf(t, dialErr(f.dialInstance("m1", "inst-b", false)))
	if a.Reason != ReasonInstanceConflict || a.Holder.Instance != "inst-a" || a.Holder.Address != "127.0.0.1" || a.Holder.Since == 0 ||
		!strings.Contains(a.Error, "--takeover") {
		t.Fatalf("409: %+v", a)
	}
	if resp, body := f.do("GET", "/api/clients/m1/x", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, "m1/inst-a") {
		t.Fatalf("the refusal disturbed the holder: %d %s", resp.StatusCode, body)
	}

	blip, err := f.dialInstance("m1", "inst-a", false)
	if err != nil {
		t.Fatalf("the same instance again: %v", err)
	}
	if reason := first.closedWith(t); reason != "replaced by a newer connection for m1" {
		t.Fatalf("same instance, old connection closed with %q", reason)
	}

	if _, err := f.dialInstance("m1", "inst-b", true); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	reason := blip.closedWith(t)
	if reason != "replaced by instance inst-b from 127.0.0.1 (--takeover)" || !(&tunnel.ClosedError{Reason: reason}).TakenOver() {
		t.Fatalf("the holder was told %q", reason)
	}
	testkit.WaitUntil(t, "the new instance to take the requests", func() bool {
		resp, body := f.do("GET", "/api/clients/m1/x", f.dash, nil)
		return resp.StatusCode == 200 && strings.Contains(body, "m1/inst-b")
	})
	for _, want := range []string{
		`msg="connector refused" connector=m1 reason="held by another instance" instance=inst-b address=127.0.0.1 holder_instance=inst-a holder_address=127.0.0.1`,
		`msg="connector replaced" connector=m1 address=127.0.0.1 credential=token replaced_address=127.0.0.1 replaced_credential=token instance=inst-a replaced_instance=inst-a`,
		`msg="connector taken over" connector=m1 address=127.0.0.1 credential=token replaced_address=127.0.0.1 replaced_credential=token instance=inst-b replaced_instance=inst-a`,
	} {
		testkit.WaitUntil(t, "the log line "+want, func() bool { return strings.Contains(logs.String(), want) })
	}

	// A malformed instance id is refused, not taken for none.
	var rej *tunnel.RejectedError
	if _, err := f.dialInstance("m1", "bad id", false); !errors.As(err, &rej) || rej.Status != http.StatusBadRequest {
		t.Fatalf("malformed instance: %v", err)
	}
}

func dialErr(_ *tunnelConn, err error) error { return err }

// In cluster mode a replica refuses a second instance the name another
// replica's connector holds, and the instance travels with the endpoint.
func TestAnotherInstanceIsRefusedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	if _, err := r1.dialInstance("alpha", "inst-a", false); err != nil {
		t.Fatal(err)
	}
	r2.waitHeld("alpha", "r1")
	if e := r2.clusterEndpoints()["alpha"]; e.Instance != "inst-a" {
		t.Fatalf("r2 lists alpha as %+v", e)
	}
	if a := conflictOf(t, dialErr(r2.dialInstance("alpha", "inst-b", false))); a.Holder.Instance != "inst-a" {
		t.Fatalf("409 on r2: %+v", a)
	}
	// The same instance may move to another replica.
	if _, err := r2.dialInstance("alpha", "inst-a", false); err != nil {
		t.Fatalf("the same instance on r2: %v", err)
	}
}
