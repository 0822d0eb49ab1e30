package presence

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// A reconnection from the same instance replaces the old connection with
// the usual reason; another instance is refused while the name is online,
// naming the holder, and takes it with Takeover, telling the old one who
// did; without an instance id on either side a newcomer replaces as before.
func TestOneInstancePerName(t *testing.T) {
	t.Parallel()
	r := New(time.Hour)
	first := newFake()
	a := Info{Instance: "inst-a", Address: "10.0.0.1", Credential: CredentialToken}
	attach(t, r, "m1", first, a)

	blip := newFake()
	if replaced, err := r.Attach("m1", blip, a); err != nil || replaced == nil || replaced.Instance != "inst-a" {
		t.Fatalf("same instance: %+v, %v", replaced, err)
	}
	testkit.WaitUntil(t, "the first connection to be replaced", func() bool { return first.reason.Load() != nil })
	if got := first.reason.Load(); got != "replaced by a newer connection for m1" {
		t.Fatalf("same-instance close reason %v", got)
	}

	b := Info{Instance: "inst-b", Address: "10.0.0.2", Credential: CredentialToken}
	if c := r.Conflict("m1", b); c == nil || c.Holder.Instance != "inst-a" {
		t.Fatalf("Conflict: %+v", c)
	}
	intruder := newFake()
	_, err := r.Attach("m1", intruder, b)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Holder.Address != "10.0.0.1" || conflict.Since.IsZero() {
		t.Fatalf("another instance: %v", err)
	}
	for _, want := range []string{`"m1"`, "inst-a", "10.0.0.1", "--takeover"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if c, online, _ := r.Get("m1"); c != blip || !online || blip.reason.Load() != nil {
		t.Fatal("the refusal disturbed the holder")
	}

	taker := newFake()
	b.Takeover = true
	if replaced, err := r.Attach("m1", taker, b); err != nil || replaced == nil {
		t.Fatalf("takeover: %+v, %v", replaced, err)
	}
	testkit.WaitUntil(t, "the holder to be told", func() bool { return blip.reason.Load() != nil })
	reason := blip.reason.Load().(string)
	if reason != "replaced by instance inst-b from 10.0.0.2 (--takeover)" || !(&tunnel.ClosedError{Reason: reason}).TakenOver() {
		t.Fatalf("takeover close reason %q", reason)
	}
	if eps := r.List(); eps[0].Instance != "inst-b" {
		t.Fatalf("listed %+v", eps)
	}
	// What the list keeps is the instance, not the request to take over:
	// the next instance is refused again.
	if _, err := r.Attach("m1", newFake(), a); !errors.As(err, &conflict) {
		t.Fatalf("the old instance came back: %v", err)
	}

	// Offline, the name is free for another instance.
	if err := taker.Close("gone"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "m1 to be offline", func() bool { return r.Online() == 0 })
	if r.Conflict("m1", a) != nil {
		t.Fatal("an offline holder still conflicts")
	}
	if _, err := r.Attach("m1", newFake(), a); err != nil {
		t.Fatalf("after the holder left: %v", err)
	}

	// Older connectors and original clients carry no instance: replaced,
	// and replacing, as before.
	legacyOld, legacyNew := newFake(), newFake()
	none := Info{Credential: CredentialToken}
	attach(t, r, "m2", legacyOld, none)
	if _, err := r.Attach("m2", legacyNew, a); err != nil {
		t.Fatalf("an instance over none: %v", err)
	}
	if _, err := r.Attach("m2", newFake(), none); err != nil {
		t.Fatalf("none over an instance: %v", err)
	}
}

func TestValidInstance(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "01JABCDEF", "x_y-z", strings.Repeat("a", 64)} {
		if !ValidInstance(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a/b", "a\nb", `a"b`, strings.Repeat("a", 65), "ü"} {
		if ValidInstance(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
