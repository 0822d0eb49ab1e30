package presence

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// fp is the fingerprint of an instance id and key, failing the test on a
// refusal.
func fp(t *testing.T, id, key string) string {
	t.Helper()
	f, err := InstanceOf(id, key)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Keys of the tests: random-looking, of the connector's length.
var (
	keyA = strings.Repeat("a", 52)
	keyB = strings.Repeat("b", 52)
)

// A reconnection from the same instance replaces the old connection with
// the usual reason; another instance is refused while the name is online,
// naming the holder by fingerprint, and takes it with Takeover, telling
// the old one who did; without an instance on either side a newcomer
// replaces as before.
func TestOneInstancePerName(t *testing.T) {
	t.Parallel()
	r := New(time.Hour)
	first := newFake()
	a := Info{Instance: fp(t, "inst-a", keyA), Address: "10.0.0.1", Credential: CredentialToken}
	attach(t, r, "m1", first, a)

	blip := newFake()
	if replaced, err := r.Attach("m1", blip, a); err != nil || replaced == nil || replaced.Instance != a.Instance {
		t.Fatalf("same instance: %+v, %v", replaced, err)
	}
	testkit.WaitUntil(t, "the first connection to be replaced", func() bool { return first.reason.Load() != nil })
	if got := first.reason.Load(); got != "replaced by a newer connection for m1" {
		t.Fatalf("same-instance close reason %v", got)
	}

	b := Info{Instance: fp(t, "inst-b", keyB), Address: "10.0.0.2", Credential: CredentialToken}
	if c := r.Conflict("m1", b); c == nil || c.Holder.Instance != a.Instance {
		t.Fatalf("Conflict: %+v", c)
	}
	intruder := newFake()
	_, err := r.Attach("m1", intruder, b)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Holder.Address != "10.0.0.1" || conflict.Since.IsZero() {
		t.Fatalf("another instance: %v", err)
	}
	for _, want := range []string{`"m1"`, a.Instance, "10.0.0.1", "--takeover"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	for _, secret := range []string{"inst-a", keyA} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("refusal %q shows %q", err, secret)
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
	if reason != "replaced by instance "+b.Instance+" from 10.0.0.2 (--takeover)" || !(&tunnel.ClosedError{Reason: reason}).TakenOver() {
		t.Fatalf("takeover close reason %q", reason)
	}
	if eps := r.List(); eps[0].Instance != b.Instance {
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

	// Original clients carry no instance: replaced as before.
	legacyOld := newFake()
	none := Info{Credential: CredentialToken}
	attach(t, r, "m2", legacyOld, none)
	if _, err := r.Attach("m2", newFake(), a); err != nil {
		t.Fatalf("an instance over none: %v", err)
	}
}

// Who may replace a holder online, for every kind of holder and of
// newcomer: a holder that proved a key gives way only to the same key or
// a takeover; an id (copied or not) never displaces it.
func TestWhoMayReplaceAnInstance(t *testing.T) {
	t.Parallel()
	const (
		idA, idB = "inst-a", "inst-b"
	)
	type who struct {
		name    string
		id, key string
	}
	holders := []who{{"proven", idA, keyA}, {"id only", idA, ""}, {"no instance", "", ""}}
	newcomers := []who{
		{"same key", idA, keyA},
		{"same key, another id", idB, keyA},
		{"same key, no id", "", keyA},
		{"another key, the holder's id", idA, keyB},
		{"another key", idB, keyB},
		{"the holder's id alone", idA, ""},
		{"another id", idB, ""},
		{"no instance", "", ""},
	}
	// same[h][n] says whether newcomer n is the holder h's instance.
	same := map[string]map[string]bool{
		"proven":  {"same key": true, "same key, another id": true, "same key, no id": true},
		"id only": {"the holder's id alone": true, "no instance": true},
		"no instance": {"same key": true, "same key, another id": true, "same key, no id": true, "another key, the holder's id": true,
			"another key": true, "the holder's id alone": true, "another id": true, "no instance": true},
	}
	for _, h := range holders {
		for _, n := range newcomers {
			for _, takeover := range []bool{false, true} {
				r := New(time.Hour)
				holder := newFake()
				attach(t, r, "m", holder, Info{Instance: fp(t, h.id, h.key), Credential: CredentialToken})
				newer := Info{Instance: fp(t, n.id, n.key), Credential: CredentialToken, Takeover: takeover}
				_, err := r.Attach("m", newFake(), newer)
				wantIn := same[h.name][n.name] || takeover
				if (err == nil) != wantIn {
					t.Errorf("holder %s, newcomer %s, takeover %v: %v", h.name, n.name, takeover, err)
				}
				if Differs(fp(t, h.id, h.key), newer.Instance) == same[h.name][n.name] {
					t.Errorf("Differs(holder %s, newcomer %s) disagrees", h.name, n.name)
				}
				if err != nil {
					continue
				}
				testkit.WaitUntil(t, "the holder to be closed", func() bool { return holder.reason.Load() != nil })
				if taken := (&tunnel.ClosedError{Reason: holder.reason.Load().(string)}).TakenOver(); taken == same[h.name][n.name] {
					t.Errorf("holder %s, newcomer %s: closed with %q", h.name, n.name, holder.reason.Load())
				}
			}
		}
	}
}

// InstanceOf shows neither the id nor the key, tells a key's fingerprint
// from an id's, and refuses what is malformed instead of taking it for
// no instance.
func TestInstanceOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ id, key string }{{"a", ""}, {"01JABCDEF", keyA}, {"x_y-z", ""}, {strings.Repeat("a", 64), ""}, {"", keyB}, {"", strings.Repeat("Z", 128)}} {
		f, err := InstanceOf(c.id, c.key)
		if err != nil || !ValidFingerprint(f) || Proven(f) != (c.key != "") {
			t.Errorf("InstanceOf(%q, %q) = %q, %v", c.id, c.key, f, err)
		}
		if (len(c.id) >= 8 && strings.Contains(f, c.id)) || (c.key != "" && strings.Contains(f, c.key)) {
			t.Errorf("InstanceOf(%q, %q) = %q shows what it was made of", c.id, c.key, f)
		}
	}
	if f, err := InstanceOf("", ""); f != "" || err != nil {
		t.Errorf("no instance: %q %v", f, err)
	}
	// An id and a key of the same text are not the same instance.
	if k, i := fp(t, "", keyA), fp(t, keyA, ""); k == i || !Differs(k, i) || !Differs(i, k) {
		t.Errorf("key %s and id %s", k, i)
	}
	for _, bad := range []string{" ", "a b", "a/b", "a\nb", `a"b`, strings.Repeat("a", 65), "ü"} {
		if _, err := InstanceOf(bad, keyA); !errors.Is(err, ErrBadInstanceID) {
			t.Errorf("id %q: %v", bad, err)
		}
	}
	for _, bad := range []string{strings.Repeat("a", 31), strings.Repeat("a", 129), strings.Repeat("a", 40) + " ", strings.Repeat("ü", 40), "key:" + strings.Repeat("0", 32)} {
		if _, err := InstanceOf("inst", bad); !errors.Is(err, ErrBadInstanceKey) {
			t.Errorf("key %q: %v", bad, err)
		}
	}
	for _, bad := range []string{"", "inst-a", "key:" + strings.Repeat("0", 31), "KEY:" + strings.Repeat("0", 32), "id:" + strings.Repeat("g", 32)} {
		if ValidFingerprint(bad) {
			t.Errorf("fingerprint %q accepted", bad)
		}
	}
}
