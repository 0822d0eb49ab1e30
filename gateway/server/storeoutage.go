package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/internal/spool"
	"github.com/uncaged/workflow/gateway/store"
)

// A store outage — the database does not answer at all (PostgreSQL
// stopped or restarting, the network) — is something the gateway lives
// through: it serves connectors and proxied requests from memory, queues
// what it writes behind the requests (storewrites.go), answers the
// routes that need the store 503 with Retry-After (storeUnavailable), and
// stays ready, since every replica shares the database and taking them
// all out of service at once would help nobody. It says so twice: one
// ERROR when the outage starts and one when it is over, with how long it
// lasted and what it cost, never a line per request.
//
// The outage starts at the first sign, whichever comes first: the store's
// health check (bounds.go), the queue's writer, or a request whose store
// call failed so. It is over when the store answers again and everything
// queued until then has been written.

// storeRetryAfter is the Retry-After of a 503 for want of the store, in
// seconds: about when the next health check (every 2 s) can have seen it
// back.
const storeRetryAfter = "5"

// ReasonStoreUnavailable is the "reason" of the JSON body of a request
// refused because the store did not answer what it needed.
const ReasonStoreUnavailable = "store-unavailable"

// errStoreUnavailable marks a request's error as the store's
// (storeUnavailable), for the error handler's Retry-After and reason.
var errStoreUnavailable = errors.New("the gateway's store does not answer")

// outageState is where an outage stands.
type outageState int

const (
	storeFine       outageState = iota
	storeDown                   // the store does not answer
	storeRecovering             // it answers; what waited is being written
)

// storeOutage follows the store's outages.
type storeOutage struct {
	g *Gateway
	// refused counts the requests refused for want of the store, ever.
	refused atomic.Uint64

	mu    sync.Mutex
	state outageState
	since time.Time
	err   string
	// start is the queue's counts when the outage started, and
	// refusedAtStart the requests refused by then; recoverAt is the
	// queue's last record when the store answered again.
	start          spool.Stats
	refusedAtStart uint64
	recoverAt      uint64
}

// down records a sign that the store does not answer: the start of an
// outage (one ERROR), or more of one.
func (o *storeOutage) down(err error) {
	g := o.g
	g.metrics.StoreReady(false)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = err.Error()
	switch o.state {
	case storeRecovering:
		o.state = storeDown
		return
	case storeDown:
		return
	}
	o.state, o.since = storeDown, g.now()
	o.start, o.refusedAtStart = g.writes.stats(), o.refused.Load()
	attrs := []any{"err", o.err, "queued", o.start.Pending()}
	if st := g.opts.Store; st != nil {
		attrs = append(attrs, "database", st.Where())
	}
	g.opts.Logger.Error("store outage: the database does not answer; what the gateway writes waits in its queue, what needs the store is refused 503; still ready, serving from memory", attrs...)
}

// up records that the store answered: the outage, if any, is over once
// what waited is written (progress).
func (o *storeOutage) up() {
	o.mu.Lock()
	if o.state != storeDown {
		o.mu.Unlock()
		return
	}
	o.state = storeRecovering
	if w := o.g.writes; w != nil {
		o.recoverAt = w.q.Last()
		w.q.Kick()
	}
	o.mu.Unlock()
	o.progress()
}

// progress ends a recovering outage once everything queued up to the
// store's return is written (or dropped), with the one line that says
// what it cost.
func (o *storeOutage) progress() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != storeRecovering {
		return
	}
	w := o.g.writes
	if w != nil && !w.q.Drained(o.recoverAt) {
		return
	}
	o.state = storeFine
	s := w.stats()
	o.g.opts.Logger.Error("store outage over: the database answers again and what waited is written",
		"lasted", o.g.now().Sub(o.since).Round(time.Millisecond).String(), "since", o.since.UTC().Format(time.RFC3339),
		"queued", uint64(o.start.Pending())+s.Added-o.start.Added, "written", s.Written-o.start.Written, "dropped", s.Dropped-o.start.Dropped,
		"requests_refused", o.refused.Load()-o.refusedAtStart, "last_err", o.err)
}

// status is where the store stands for /readyz: "up", "down" or
// "recovering", since when, and the last error of the outage.
func (o *storeOutage) status() (state string, since time.Time, err string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.state {
	case storeDown:
		return "down", o.since, o.err
	case storeRecovering:
		return "recovering", o.since, o.err
	}
	return "up", time.Time{}, ""
}

// storeUnavailable is what every route that needs the store answers when
// the store failed it: 503 with Retry-After and
// {"error": "<what>: …", "reason": "store-unavailable"} (the error
// handler adds both). It counts the refusal, and an error that says the
// store is out of reach starts (or continues) an outage instead of a log
// line per request; any other is logged, rate-limited. A client that went
// away is nobody to answer.
func (g *Gateway) storeUnavailable(what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	g.outage.refused.Add(1)
	g.metrics.StoreRequestRefused()
	g.storeFailed(what, err)
	return &echo.HTTPError{Code: http.StatusServiceUnavailable, Message: what + ": the gateway's store does not answer; retry later", Internal: errStoreUnavailable}
}

// readyBody is /readyz's answer when ready: {"ok": true} and, with a
// store, where it stands — "up", or "down" or "recovering" since when,
// why, and how many records wait for it.
func (g *Gateway) readyBody() map[string]any {
	body := map[string]any{"ok": true}
	if g.opts.Store == nil {
		return body
	}
	state, since, why := g.outage.status()
	detail := map[string]any{"status": state, "queued": g.writes.stats().Pending()}
	if state != "up" {
		detail["since"] = since.UTC().Format(time.RFC3339)
		detail["error"] = why
	}
	body["store"] = detail
	return body
}

// storeFailed notes a store call that failed a request: a sign of an
// outage when the store is out of reach, else a line in the log
// (rate-limited: a request can be sent a million times).
func (g *Gateway) storeFailed(what string, err error) {
	if store.Unavailable(err) {
		g.outage.down(err)
		return
	}
	g.bounds.untrusted.Error("store failed a request", "what", what, "err", err.Error())
}
