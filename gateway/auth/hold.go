package auth

import (
	"context"
	"errors"
	"sync"
	"time"
)

// # What a credential opened ends with it
//
// Verify decides whether a credential may open something: a request, an
// event stream, a connector's tunnel. What it opened must not outlive
// the credential, so whoever opens something with a verified Principal
// holds it here (Hold, or Bind for a request's context), and the
// authority ends it, once, when the credential ends:
//
//   - revoked: Revoke, Apply and Load end the holds of the token ids they
//     mark revoked before they return, on every replica that gets the
//     store's notification;
//   - expired: one timer per hold, on the authority's Clock, fires at the
//     token's expiry. Nothing is polled per request.
//
// The shared secret can be neither revoked nor made to expire, and a
// token signed before ids existed can only expire: holding those costs
// nothing beyond what they can end by.

// Clock is the authority's time: Now decides whether a token has
// expired, AfterFunc ends what it opened when it does. A test drives its
// own (SetClock).
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once d has passed; stop cancels it and reports
	// whether it had not run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SetClock makes the authority tell time by c, for tests.
func (a *Authority) SetClock(c Clock) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now, a.afterFunc = c.Now, c.AfterFunc
}

// systemAfterFunc is AfterFunc on the system's clock.
func systemAfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// hold is one thing a credential opened.
type hold struct {
	tokenID string
	end     func(*Refusal)
	// stopTimer cancels the expiry timer; nil without an expiry.
	stopTimer func() bool
	// once makes the end and the release exclusive: whichever comes first
	// is the only one.
	once sync.Once
}

// finish ends h for why, unless it was released or ended already. Its
// timer is stopped: not from the timer itself, which may fire before
// Hold has even noted how to stop it.
func (h *hold) finish(why *Refusal, fromTimer bool) {
	h.once.Do(func() {
		if !fromTimer && h.stopTimer != nil {
			h.stopTimer()
		}
		h.end(why)
	})
}

// Hold registers something p's credential opened: end is called once,
// with the refusal saying why ("revoked" or "expired"), when the token is
// revoked or reaches its expiry — at once, before Hold returns, when that
// happened already. release unregisters it; call it when the thing ends
// on its own (end is then never called). end must not block: it runs
// where the revocation is applied or the timer fires.
func (a *Authority) Hold(p Principal, end func(*Refusal)) (release func()) {
	if p.Shared || (p.TokenID == "" && p.Expires.IsZero()) {
		return func() {}
	}
	h := &hold{tokenID: p.TokenID, end: end}
	a.mu.Lock()
	now := a.now()
	switch {
	case h.tokenID != "" && a.revoked[h.tokenID]:
		a.mu.Unlock()
		h.finish(revokedRefusal(), false)
		return func() {}
	case !p.Expires.IsZero() && !now.Before(p.Expires):
		a.mu.Unlock()
		h.finish(expiredRefusal(p.Expires), false)
		return func() {}
	}
	if h.tokenID != "" {
		if a.holds == nil {
			a.holds = map[*hold]struct{}{}
		}
		a.holds[h] = struct{}{}
	}
	if !p.Expires.IsZero() {
		exp := p.Expires
		h.stopTimer = a.afterFunc(exp.Sub(now), func() {
			a.forget(h)
			h.finish(expiredRefusal(exp), true)
		})
	}
	a.mu.Unlock()
	return func() {
		a.forget(h)
		h.once.Do(func() {
			if h.stopTimer != nil {
				h.stopTimer()
			}
		})
	}
}

// forget drops h from the holds a revocation looks at.
func (a *Authority) forget(h *hold) {
	if h.tokenID == "" {
		return
	}
	a.mu.Lock()
	delete(a.holds, h)
	a.mu.Unlock()
}

// revokedHoldsLocked takes out of a.holds those whose token is revoked
// (a.mu held); the caller ends them once it has let go of a.mu.
func (a *Authority) revokedHoldsLocked() []*hold {
	var ended []*hold
	for h := range a.holds {
		if a.revoked[h.tokenID] {
			delete(a.holds, h)
			ended = append(ended, h)
		}
	}
	return ended
}

// endHolds ends each of hs as revoked.
func endHolds(hs []*hold) {
	for _, h := range hs {
		h.finish(revokedRefusal(), false)
	}
}

// revocableHolds counts what is held open by tokens that can be revoked.
func (a *Authority) revocableHolds() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.holds)
}

// Bind returns a context that ends when ctx does or, with the *Refusal
// as its cause (Ended), when p's credential is revoked or expires. Call
// done when the work under it is over. For a credential that cannot end
// it returns ctx itself.
func (a *Authority) Bind(ctx context.Context, p Principal) (bound context.Context, done func()) {
	if p.Shared || (p.TokenID == "" && p.Expires.IsZero()) {
		return ctx, func() {}
	}
	bound, cancel := context.WithCancelCause(ctx)
	release := a.Hold(p, func(why *Refusal) { cancel(why) })
	return bound, func() {
		release()
		cancel(context.Canceled)
	}
}

// Ended is why ctx's credential ended (Bind), or nil when it did not.
func Ended(ctx context.Context) *Refusal {
	var r *Refusal
	if errors.As(context.Cause(ctx), &r) {
		return r
	}
	return nil
}

func revokedRefusal() *Refusal { return refuse(ReasonRevoked, "token revoked") }

func expiredRefusal(at time.Time) *Refusal {
	return refuse(ReasonExpired, "token expired at %s", at.UTC().Format(time.RFC3339))
}
