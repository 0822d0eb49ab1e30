package auth

import (
	"context"
	"sync"
	"sync/atomic"
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

// session is what one credential — a token id and its expiry — holds
// open: its holds, and one timer for the expiry however many there are.
// It lives until the credential ends (its holds then end with it), not
// while it holds something: a dashboard's requests come one after
// another, and each would otherwise set and stop a timer of its own.
type session struct {
	key   sessionKey
	holds map[*hold]struct{}
	// stopTimer cancels the expiry timer; nil without an expiry.
	stopTimer func() bool
}

// sessionKey names a credential: a token's id and expiry (unix ns, 0 for
// none). Tokens without an id share one per expiry: they end together.
type sessionKey struct {
	tokenID string
	expires int64
}

// hold is one thing a credential opened: end (or cancel, for Bind) is
// called once when the credential ends, unless release came first.
type hold struct {
	a   *Authority
	s   *session // nil when it ended before it was registered
	end func(*Refusal)
	// stop ends a Bind's context; why is then why it ended.
	stop context.CancelFunc
	why  atomic.Pointer[Refusal]
	// once makes the end and the release exclusive: whichever comes first
	// is the only one.
	once sync.Once
}

// finish ends h for why, unless it was released or ended already.
func (h *hold) finish(why *Refusal) {
	h.once.Do(func() {
		if h.stop != nil {
			h.why.Store(why)
			h.stop()
			return
		}
		h.end(why)
	})
}

// release lets h go without ending it.
func (h *hold) release() {
	h.once.Do(func() {
		if h.s == nil {
			return
		}
		h.a.mu.Lock()
		delete(h.s.holds, h)
		h.a.mu.Unlock()
	})
}

// Hold registers something p's credential opened: end is called once,
// with the refusal saying why ("revoked" or "expired"), when the token is
// revoked or reaches its expiry — at once, before Hold returns, when that
// happened already. release unregisters it; call it when the thing ends
// on its own (end is then never called). end must not block: it runs
// where the revocation is applied or the timer fires.
func (a *Authority) Hold(p Principal, end func(*Refusal)) (release func()) {
	if !canEnd(p) {
		return func() {}
	}
	h := &hold{a: a, end: end}
	a.register(h, p)
	return h.release
}

// canEnd says whether p's credential can be revoked or expire: the
// shared secret cannot, nor a token without an id or an expiry.
func canEnd(p Principal) bool {
	return !p.Shared && (p.TokenID != "" || !p.Expires.IsZero())
}

// register puts h in p's session, or finishes it at once when p's
// credential has ended already.
func (a *Authority) register(h *hold, p Principal) {
	a.mu.Lock()
	now := a.now()
	switch {
	case p.TokenID != "" && a.revoked[p.TokenID]:
		a.mu.Unlock()
		h.finish(revokedRefusal())
		return
	case !p.Expires.IsZero() && !now.Before(p.Expires):
		a.mu.Unlock()
		h.finish(expiredRefusal(p.Expires))
		return
	}
	h.s = a.sessionLocked(p, now)
	h.s.holds[h] = struct{}{}
	a.mu.Unlock()
}

// sessionLocked is p's session, made (with its expiry timer) on first use
// (a.mu held).
func (a *Authority) sessionLocked(p Principal, now time.Time) *session {
	key := sessionKey{tokenID: p.TokenID}
	if !p.Expires.IsZero() {
		key.expires = p.Expires.UnixNano()
	}
	if s, ok := a.sessions[key]; ok {
		return s
	}
	s := &session{key: key, holds: map[*hold]struct{}{}}
	if a.sessions == nil {
		a.sessions = map[sessionKey]*session{}
	}
	a.sessions[key] = s
	if exp := p.Expires; !exp.IsZero() {
		s.stopTimer = a.afterFunc(exp.Sub(now), func() {
			a.mu.Lock()
			ended := a.endSessionLocked(s, false)
			a.mu.Unlock()
			endHolds(ended, expiredRefusal(exp))
		})
	}
	return s
}

// endSessionLocked takes s out of the authority and returns its holds
// for the caller to end once it has let go of a.mu; stopTimer says
// whether its timer is to be stopped (not from the timer itself). A
// session ended already gives nothing.
func (a *Authority) endSessionLocked(s *session, stopTimer bool) []*hold {
	if a.sessions[s.key] != s {
		return nil
	}
	delete(a.sessions, s.key)
	if stopTimer && s.stopTimer != nil {
		s.stopTimer()
	}
	ended := make([]*hold, 0, len(s.holds))
	for h := range s.holds {
		ended = append(ended, h)
	}
	return ended
}

// revokedHoldsLocked ends the sessions of revoked tokens and returns
// their holds (a.mu held); the caller ends them once it has let go of
// a.mu.
func (a *Authority) revokedHoldsLocked() []*hold {
	var ended []*hold
	for _, s := range a.sessions {
		if s.key.tokenID != "" && a.revoked[s.key.tokenID] {
			ended = append(ended, a.endSessionLocked(s, true)...)
		}
	}
	return ended
}

// endHolds ends each of hs for why (revoked, when nil).
func endHolds(hs []*hold, why ...*Refusal) {
	r := revokedRefusal()
	if len(why) > 0 {
		r = why[0]
	}
	for _, h := range hs {
		h.finish(r)
	}
}

// revocableHolds counts what is held open by tokens that can end.
func (a *Authority) revocableHolds() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.sessions {
		n += len(s.holds)
	}
	return n
}

// Bind returns a context that ends when ctx does, after timeout when it
// is positive, or when p's credential is revoked or expires; the
// Binding's Ended then says why. Call its Done when the work under the
// context is over. For a credential that cannot end it returns ctx itself,
// with no timeout: one context a request, not two, where the caller would
// add its own timeout anyway (a context's Deadline says whether it has
// one).
func (a *Authority) Bind(ctx context.Context, p Principal, timeout time.Duration) (context.Context, Binding) {
	if !canEnd(p) {
		return ctx, Binding{}
	}
	h := &hold{a: a}
	var bound context.Context
	if timeout > 0 {
		bound, h.stop = context.WithTimeout(ctx, timeout)
	} else {
		bound, h.stop = context.WithCancel(ctx)
	}
	a.register(h, p)
	return bound, Binding{h: h}
}

// Binding is what Bind holds open. A value, not a func: a request costs
// no closure for it.
type Binding struct{ h *hold }

// Done lets the binding go: the work under its context is over.
func (b Binding) Done() {
	if b.h != nil {
		b.h.release()
		b.h.stop()
	}
}

// Ended is why the credential ended the binding's context, or nil when it
// did not (the context may still have ended otherwise).
func (b Binding) Ended() *Refusal {
	if b.h == nil {
		return nil
	}
	return b.h.why.Load()
}

func revokedRefusal() *Refusal { return refuse(ReasonRevoked, "token revoked") }

func expiredRefusal(at time.Time) *Refusal {
	return refuse(ReasonExpired, "token expired at %s", at.UTC().Format(time.RFC3339))
}
