package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// root is what a storage root sends to prove its instance: its id and
// key (either may be empty).
type root struct{ id, key string }

// fingerprint is what the gateway shows of r.
func (r root) fingerprint(t *testing.T) string {
	t.Helper()
	fp, err := presence.InstanceOf(r.id, r.key)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// Roots of the tests: two with keys, and an older connector's (id only).
var (
	rootA = root{"inst-a", strings.Repeat("a", 52)}
	rootB = root{"inst-b", strings.Repeat("b", 52)}
)

// dialRoot dials name as root r with a token for name.
func (f *fixture) dialRoot(name string, r root, takeover bool) (*tunnelConn, error) {
	f.t.Helper()
	tok, _ := f.auth.Issue(auth.RoleConnector, name, time.Hour)
	return f.dialRootWith(name, tok, r, takeover)
}

// dialRootWith dials name as root r with the credential tok.
func (f *fixture) dialRootWith(name, tok string, r root, takeover bool) (*tunnelConn, error) {
	f.t.Helper()
	h := http.Header{}
	if r.id != "" {
		h.Set(tunnel.InstanceHeader, r.id)
	}
	if r.key != "" {
		h.Set(tunnel.InstanceKeyHeader, r.key)
	}
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
	go func() {
		c.ended <- tunnel.Serve(ctx, ws, echoAPI(name+"/"+r.id+"/"+r.key[:min(len(r.key), 4)]), tunnel.ServeOptions{})
	}()
	f.t.Cleanup(func() {
		cancel()
		// How the tunnel ended is closedWith's to test; here it is only
		// waited for, and noted.
		if err := <-c.ended; err != nil {
			f.t.Logf("%s/%s: %v", name, r.id, err)
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
// connection; another is refused (409, naming the holder by fingerprint)
// unless it asks to take over, and then the holder is told who took its
// place. Every refusal and replacement is logged; the endpoints list shows
// the fingerprint, and nothing shows the key or the id.
func TestOneInstancePerConnectorName(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	fpA, fpB := rootA.fingerprint(t), rootB.fingerprint(t)
	first, err := f.dialRoot("m1", rootA, false)
	if err != nil {
		t.Fatal(err)
	}
	f.waitStatus("m1", presence.Online)
	if _, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); !strings.Contains(body, `"instance":"`+fpA+`"`) {
		t.Fatalf("endpoints: %s", body)
	}

	a := conflictOf(t, dialErr(f.dialRoot("m1", rootB, false)))
	if a.Reason != ReasonInstanceConflict || a.Holder.Instance != fpA || a.Holder.Address != "127.0.0.1" || a.Holder.Since == 0 ||
		!strings.Contains(a.Error, "--takeover") {
		t.Fatalf("409: %+v", a)
	}
	if resp, body := f.do("GET", "/api/clients/m1/x", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, "m1/inst-a") {
		t.Fatalf("the refusal disturbed the holder: %d %s", resp.StatusCode, body)
	}

	blip, err := f.dialRoot("m1", rootA, false)
	if err != nil {
		t.Fatalf("the same instance again: %v", err)
	}
	if reason := first.closedWith(t); reason != "replaced by a newer connection for m1" {
		t.Fatalf("same instance, old connection closed with %q", reason)
	}

	if _, err := f.dialRoot("m1", rootB, true); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	reason := blip.closedWith(t)
	if reason != "replaced by instance "+fpB+" from 127.0.0.1 (--takeover)" || !(&tunnel.ClosedError{Reason: reason}).TakenOver() {
		t.Fatalf("the holder was told %q", reason)
	}
	testkit.WaitUntil(t, "the new instance to take the requests", func() bool {
		resp, body := f.do("GET", "/api/clients/m1/x", f.dash, nil)
		return resp.StatusCode == 200 && strings.Contains(body, "m1/inst-b")
	})
	for _, want := range []string{
		`msg="connector refused" connector=m1 reason="held by another instance" instance=` + fpB + ` address=127.0.0.1 holder_instance=` + fpA + ` holder_address=127.0.0.1`,
		`msg="connector replaced" connector=m1 address=127.0.0.1 credential=token replaced_address=127.0.0.1 replaced_credential=token instance=` + fpA + ` replaced_instance=` + fpA,
		`msg="connector taken over" connector=m1 address=127.0.0.1 credential=token replaced_address=127.0.0.1 replaced_credential=token instance=` + fpB + ` replaced_instance=` + fpA,
	} {
		testkit.WaitUntil(t, "the log line "+want, func() bool { return strings.Contains(logs.String(), want) })
	}
	for _, secret := range []string{rootA.id, rootA.key, rootB.id, rootB.key} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log shows %q:\n%s", secret, logs.String())
		}
	}

	// A malformed instance id or key is refused, not taken for none.
	var rej *tunnel.RejectedError
	for _, bad := range []root{{id: "bad id"}, {id: "inst-a", key: "short"}, {key: strings.Repeat("a", 40) + "!"}} {
		if _, err := f.dialRoot("m1", bad, false); !errors.As(err, &rej) || rej.Status != http.StatusBadRequest {
			t.Fatalf("malformed %+v: %v", bad, err)
		}
	}
}

// The issue's case and its variants: whoever reads the holder's instance
// id (it used to be in the 409 body, the endpoints list and the cluster's
// messages) and puts it in another root is another instance, refused
// while the holder is online; only the holder's key is the holder. An
// older connector keeps working by its id alone, but its id cannot
// displace a root that proved a key.
func TestACopiedInstanceIDDoesNotTakeTheName(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	fpA := rootA.fingerprint(t)
	if _, err := f.dialRoot("m1", rootA, false); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("m1", presence.Online)
	for _, intruder := range []root{
		{id: rootA.id},                 // the id copied, no key: an older connector
		{id: rootA.id, key: rootB.key}, // the id copied into a root with its own key
		{id: "other", key: rootB.key},  // another root altogether
		{},                             // nothing at all
		{id: fpA[len("key:"):]},        // the fingerprint taken for an id
		{id: rootA.id, key: fpA[4:] + "0000000000000000"}, // the fingerprint taken for a key
	} {
		a := conflictOf(t, dialErr(f.dialRoot("m1", intruder, false)))
		if a.Holder.Instance != fpA {
			t.Fatalf("%+v: 409 %+v", intruder, a)
		}
	}
	if resp, body := f.do("GET", "/api/clients/m1/x", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, "m1/inst-a") {
		t.Fatalf("an intruder disturbed the holder: %d %s", resp.StatusCode, body)
	}
	// The holder's key is the holder, whatever id comes with it.
	if _, err := f.dialRoot("m1", root{id: "renamed", key: rootA.key}, false); err != nil {
		t.Fatalf("the holder's key with another id: %v", err)
	}

	// An older connector holding by id alone reconnects in place; another
	// id is refused; a key is another instance (an id cannot be matched to
	// a key).
	old := root{id: "older-connector"}
	if _, err := f.dialRoot("m2", old, false); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("m2", presence.Online)
	if _, err := f.dialRoot("m2", old, false); err != nil {
		t.Fatalf("the older connector again: %v", err)
	}
	for _, other := range []root{{id: "another"}, {id: old.id, key: rootB.key}} {
		conflictOf(t, dialErr(f.dialRoot("m2", other, false)))
	}

	_, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil)
	for _, secret := range []string{rootA.id, rootA.key, rootB.key, old.id} {
		if strings.Contains(body, secret) || strings.Contains(logs.String(), secret) {
			t.Fatalf("%q shown:\n%s\n%s", secret, body, logs.String())
		}
	}
}

func dialErr(_ *tunnelConn, err error) error { return err }

// In cluster mode a replica refuses a second instance the name another
// replica's connector holds, and what travels between them is the
// fingerprint, never the id or the key.
func TestAnotherInstanceIsRefusedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	// Every presence message the replicas send, as NATS carries it.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var wire testkit.Buffer
	if _, err := nc.Subscribe(">", func(m *nats.Msg) { _, _ = wire.Write(append(m.Data, '\n')) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	if _, err := r1.dialRoot("alpha", rootA, false); err != nil {
		t.Fatal(err)
	}
	r2.waitHeld("alpha", "r1")
	if e := r2.clusterEndpoints()["alpha"]; e.Instance != rootA.fingerprint(t) {
		t.Fatalf("r2 lists alpha as %+v", e)
	}
	for _, intruder := range []root{rootB, {id: rootA.id}, {}} {
		if a := conflictOf(t, dialErr(r2.dialRoot("alpha", intruder, false))); a.Holder.Instance != rootA.fingerprint(t) {
			t.Fatalf("409 on r2 to %+v: %+v", intruder, a)
		}
	}
	testkit.WaitUntil(t, "a presence message naming alpha", func() bool { return strings.Contains(wire.String(), rootA.fingerprint(t)) })
	for _, secret := range []string{rootA.id, rootA.key} {
		if strings.Contains(wire.String(), secret) {
			t.Fatalf("NATS carried %q:\n%s", secret, wire.String())
		}
	}
	// The same instance may move to another replica.
	if _, err := r2.dialRoot("alpha", rootA, false); err != nil {
		t.Fatalf("the same instance on r2: %v", err)
	}
}
