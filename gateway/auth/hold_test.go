package auth

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/internal/fakeclock"
	"github.com/uncaged/workflow/gateway/store"
)

// ends records how a hold ended.
type ends struct {
	n   atomic.Int32
	why atomic.Pointer[Refusal]
}

func (e *ends) end(r *Refusal) {
	e.why.Store(r)
	e.n.Add(1)
}

// What a credential opened ends, once, when the token is revoked — by
// Revoke, by the store's revocation notice, by a reload that finds it
// revoked — or reaches its expiry on the authority's clock; the shared
// secret and a token that can neither be revoked nor expire hold nothing
// open for ever, and something released ends no more.
func TestHoldEndsWithTheCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type credential struct {
		name string
		make func(t *testing.T, a *Authority, st store.Store) (string, store.Token)
		// revocable: it has an id; expires: after ttl.
		revocable, expires bool
	}
	const ttl = 40 * time.Second
	credentials := []credential{
		{"recorded token with a ttl", func(t *testing.T, a *Authority, st store.Store) (string, store.Token) {
			return mint(t, a, st, RoleDashboard, "", ttl, "")
		}, true, true},
		{"recorded token without expiry", func(t *testing.T, a *Authority, st store.Store) (string, store.Token) {
			return mint(t, a, st, RoleConnector, "laptop", 0, "")
		}, true, false},
		{"token without an id, with a ttl", func(t *testing.T, a *Authority, st store.Store) (string, store.Token) {
			tok, _ := a.Issue(RoleDashboard, "", ttl)
			return tok, store.Token{}
		}, false, true},
		{"token without an id nor expiry", func(t *testing.T, a *Authority, st store.Store) (string, store.Token) {
			tok, _ := a.Issue(RoleDashboard, "", 0)
			return tok, store.Token{}
		}, false, false},
		{"shared secret", func(*testing.T, *Authority, store.Store) (string, store.Token) { return "shared", store.Token{} }, false, false},
	}
	type ending struct {
		name string
		// do ends the credential the way it says, and reports whether it
		// can end this one.
		do func(a *Authority, st store.Store, clock *fakeclock.Clock, rec store.Token) error
		// byRevocation: only a token with an id can be ended so.
		byRevocation bool
		reason       string
	}
	endings := []ending{
		{"Revoke", func(a *Authority, _ store.Store, _ *fakeclock.Clock, rec store.Token) error {
			if rec.ID != "" {
				a.Revoke(rec.ID)
			}
			return nil
		}, true, ReasonRevoked},
		{"the store's revocation notice", func(a *Authority, st store.Store, _ *fakeclock.Clock, rec store.Token) error {
			if rec.ID == "" {
				return nil // nothing to revoke
			}
			if _, err := st.RevokeToken(ctx, rec.ID); err != nil {
				return err
			}
			return a.Apply(ctx, store.Change{Kind: store.ChangeRevocation, IDs: []string{rec.ID}})
		}, true, ReasonRevoked},
		{"a reload", func(a *Authority, st store.Store, _ *fakeclock.Clock, rec store.Token) error {
			if rec.ID != "" {
				if _, err := st.RevokeToken(ctx, rec.ID); err != nil {
					return err
				}
			}
			return a.Apply(ctx, store.Change{Kind: store.ChangeReload})
		}, true, ReasonRevoked},
		{"expiry", func(_ *Authority, _ store.Store, clock *fakeclock.Clock, _ store.Token) error {
			clock.Advance(ttl)
			return nil
		}, false, ReasonExpired},
	}
	for _, cr := range credentials {
		for _, en := range endings {
			for _, released := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/released %v", cr.name, en.name, released)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					st := openStore(t, store.Config{DataDir: t.TempDir()})
					a := newAuthority(t, "shared")
					clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
					a.SetClock(clock)
					if err := a.Load(ctx, st); err != nil {
						t.Fatal(err)
					}
					tok, rec := cr.make(t, a, st)
					role, cname := RoleDashboard, ""
					if rec.Kind == store.KindConnector {
						role, cname = RoleConnector, "laptop"
					}
					p, err := a.Verify(tok, role, cname)
					if err != nil {
						t.Fatal(err)
					}
					var e ends
					release := a.Hold(p, e.end)
					bound, binding := a.Bind(ctx, p, 0)
					done := binding.Done
					defer done()
					clock.Advance(ttl - time.Second)
					if e.n.Load() != 0 || bound.Err() != nil {
						t.Fatalf("ended a second before anything ended it: %v", e.why.Load())
					}
					if released {
						release()
						done()
					}
					if err := en.do(a, st, clock, rec); err != nil {
						t.Fatal(err)
					}
					canEnd := (en.byRevocation && cr.revocable) || (!en.byRevocation && cr.expires)
					want := int32(0)
					if canEnd && !released {
						want = 1
					}
					if got := e.n.Load(); got != want {
						t.Fatalf("ended %d times, want %d", got, want)
					}
					if want == 1 {
						if why := e.why.Load(); why.Reason != en.reason {
							t.Fatalf("ended for %q, want %q", why.Reason, en.reason)
						}
						if why := binding.Ended(); why == nil || why.Reason != en.reason || !errors.Is(bound.Err(), context.Canceled) {
							t.Fatalf("the bound context: %v, %v", bound.Err(), why)
						}
					} else if binding.Ended() != nil {
						t.Fatalf("the bound context ended for %v", binding.Ended())
					}
					// Released, nothing is held; once the credential ended,
					// nothing stays behind, and until then at most its one
					// expiry timer, however many things it held.
					release()
					done()
					timers := 0
					if cr.expires && !canEnd {
						timers = 1
					}
					if a.revocableHolds() != 0 || clock.Pending() != timers {
						t.Fatalf("%d holds and %d timers left, want none and %d", a.revocableHolds(), clock.Pending(), timers)
					}
					// Held again once ended: ended at once, as the credential
					// can no longer be verified.
					if want == 1 {
						var again ends
						a.Hold(p, again.end)
						if again.n.Load() != 1 || again.why.Load().Reason != en.reason {
							t.Fatalf("held after it ended: %d, %v", again.n.Load(), again.why.Load())
						}
						if _, err := a.Verify(tok, role, cname); ReasonOf(err) != en.reason {
							t.Fatalf("verified after it ended: %v", err)
						}
					}
				})
			}
		}
	}
}

// Many holds on tokens of random lifetimes, some released, some revoked,
// under a clock advancing in random steps: after each step exactly the
// holds whose token expired or was revoked, and was not released, have
// ended, each once; and a verification served from the cache never
// outlives its token.
func TestHoldsEndAtTheirExpiryWhateverTheOrder(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	t.Logf("seed %d", seed)
	a := newAuthority(t, "")
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := fakeclock.New(start)
	a.SetClock(clock)
	type held struct {
		tok               string
		p                 Principal
		e                 ends
		release           func()
		released, revoked bool
	}
	var all []*held
	for range 300 {
		ttl := time.Duration(1+rng.IntN(120)) * time.Second
		var tok string
		var err error
		if rng.IntN(2) == 0 {
			tok, _, err = a.Mint(RoleDashboard, "", ttl, "")
		} else {
			tok, err = a.Issue(RoleDashboard, "", ttl)
		}
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Verify(tok, RoleDashboard, "")
		if err != nil {
			t.Fatal(err)
		}
		h := &held{tok: tok, p: p}
		h.release = a.Hold(p, h.e.end)
		all = append(all, h)
	}
	// One timer per credential, not per hold: a token held twice more
	// sets none more.
	before := clock.Pending()
	for _, h := range all[:10] {
		a.Hold(h.p, func(*Refusal) {})()
		a.Hold(h.p, func(*Refusal) {})()
	}
	if clock.Pending() != before {
		t.Fatalf("%d timers for 300 credentials, %d after holding 10 of them again", before, clock.Pending())
	}
	for clock.Now().Before(start.Add(130 * time.Second)) {
		for range 5 {
			switch h := all[rng.IntN(len(all))]; rng.IntN(3) {
			case 0:
				h.release()
				if h.e.n.Load() == 0 {
					h.released = true
				}
			case 1:
				if h.p.TokenID != "" && !h.revoked && h.e.n.Load() == 0 && !h.released {
					a.Revoke(h.p.TokenID)
					h.revoked = true
				}
			}
		}
		clock.Advance(time.Duration(rng.IntN(5000)) * time.Millisecond)
		now := clock.Now()
		for i, h := range all {
			expired := !now.Before(h.p.Expires)
			want := int32(0)
			if !h.released && (expired || h.revoked) {
				want = 1
			}
			if got := h.e.n.Load(); got != want {
				t.Fatalf("at +%v, hold %d (expires +%v, revoked %v, released %v) ended %d times, want %d",
					now.Sub(start), i, h.p.Expires.Sub(start), h.revoked, h.released, got, want)
			}
			if _, err := a.Verify(h.tok, RoleDashboard, ""); (err == nil) == (expired || h.revoked) {
				t.Fatalf("at +%v, token %d (expires +%v, revoked %v) verified: %v", now.Sub(start), i, h.p.Expires.Sub(start), h.revoked, err)
			}
		}
	}
	if a.revocableHolds() != 0 || clock.Pending() != 0 {
		t.Fatalf("%d holds and %d timers left when every token expired", a.revocableHolds(), clock.Pending())
	}
}
