package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
)

// The fleet's memory (Options.Store): while a connector is online on this
// replica, the gateway reads the connector's change stream
// (GET /api/events, shared/fleet) through the connector's tunnel — its own
// round trip, not the proxy's — and queues what it hears for the store in
// batches, one transaction each (storewrites.go: written in order, kept
// through a database outage). After a break it reconnects with the last
// id it queued, so only what changed is sent again; a reset from the
// connector (it restarted) brings the whole list. Nothing here is on the
// proxied request path: the stream starts when presence says the
// connector came online, and a request for a connector that is online never
// reaches the store. In cluster mode only the replica holding the tunnel
// reads the stream; every replica answers searches from the shared
// database (fleet_http.go). Original clients have no change stream: their
// thread lists are read instead (fleet_legacy.go).

// Tuning of the change stream's reader.
const (
	// fleetBatch bounds the threads written in one transaction: a resync of
	// a thousand threads is a few transactions, not a thousand.
	fleetBatch = 500
	// fleetQueue is how many decoded events wait for the store. Every
	// connector online has a queue, almost always empty, so it is small:
	// a resync's events gather in it while a transaction is written, and
	// each transaction takes what has gathered.
	fleetQueue = 64
	// fleetTouchEvery is how often the machines whose streams are read
	// here are marked seen, all in one store write, so "last seen" of a
	// machine that goes away silently is at most this old.
	fleetTouchEvery = time.Minute
	// fleetRetryMin and fleetRetryMax bound the wait before reading the
	// stream again after it broke while the connector stayed online.
	fleetRetryMin = time.Second
	fleetRetryMax = 30 * time.Second
	// fleetWriteTimeout bounds one write of a batch of threads.
	fleetWriteTimeout = 30 * time.Second
)

// fleetMemory feeds the store from the connectors online here and answers
// from it for those that are not. nil when the gateway keeps nothing.
type fleetMemory struct {
	g   *Gateway
	st  store.Store
	log *slog.Logger

	// touchEvery is fleetTouchEvery but for tests, which cannot wait a
	// minute for a round.
	touchEvery time.Duration
	// legacyEvery is legacyPollEvery but for tests (fleet_legacy.go); it
	// is read under mu.
	legacyEvery time.Duration

	mu      sync.Mutex
	readers map[string]*fleetReader // by connector name
	// touching is the loop marking the readers' machines seen (touchLoop),
	// running while there are readers; nil when there are none, so an idle
	// gateway, or one shut down, keeps no timer.
	touching *fleetToucher
	// closed is set by close: the gateway is shutting down.
	closed bool
	// lastIDs are the last event ids stored, by connector name, so that a
	// connector whose tunnel broke and came back (a network blip, a
	// replica moving) resumes instead of sending everything again. Only in
	// memory: after a gateway restart the first stream is a full resync.
	lastIDs map[string]string

	// seen caches the machines' last-seen times for searches, which show
	// them beside every thread: reading every machine per search would
	// cost more than the search at a thousand machines, and a second old
	// is fresh enough for "last seen".
	seenMu sync.Mutex
	seenAt time.Time
	seen   map[string]store.Machine
	// lastMachines is what the store listed last: the machines endpoint
	// answers from it while the store does not answer. Its own lock:
	// seenMu is held around the listing that sets it.
	lastMu       sync.Mutex
	lastMachines []store.Machine

	// statsCache keeps the glance's answers (stats.go): at 100,000 threads
	// one costs about a second of the database, and every open glance
	// asks the same question every 30 s.
	statsMu    sync.Mutex
	statsCache map[statsKey]statsAnswer
}

// fleetReader is the goroutine reading one connection's change stream.
type fleetReader struct {
	conn presence.Conn
	stop context.CancelFunc
	done chan struct{}
}

// fleetToucher is a running touchLoop.
type fleetToucher struct {
	stop context.CancelFunc
	done chan struct{} // closed when the loop has returned
}

// newFleet hooks the fleet's memory to presence, or returns nil when
// Options.Store is nil.
func (g *Gateway) newFleet() *fleetMemory {
	if g.opts.Store == nil {
		return nil
	}
	return g.newFleetOver(g.opts.Store, cmp.Or(g.opts.fleetTouchEvery, fleetTouchEvery))
}

// newFleetOver hooks to presence a fleet's memory kept in st, marking
// the connected machines seen every touchEvery.
func (g *Gateway) newFleetOver(st store.Store, touchEvery time.Duration) *fleetMemory {
	fl := &fleetMemory{g: g, st: st, log: g.opts.Logger, touchEvery: touchEvery, legacyEvery: legacyPollEvery,
		readers: map[string]*fleetReader{}, lastIDs: map[string]string{}}
	prev := g.presence.OnChange
	g.presence.OnChange = func(name, status string) {
		if prev != nil {
			prev(name, status)
		}
		fl.changed(name, status)
	}
	return fl
}

// changed starts a reader for a connector that came online (replacing the
// reader of a connection it replaced) and stops the reader of one that
// went offline.
func (fl *fleetMemory) changed(name, status string) {
	conn, online, _ := fl.g.presence.Get(name)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	defer fl.touchWhileReading()
	r := fl.readers[name]
	if r != nil && (!online || r.conn != conn) {
		r.stop()
		delete(fl.readers, name)
		r = nil
	}
	if !online || r != nil {
		return
	}
	read := fl.read
	if t, ok := conn.(*tracked); ok && t.protocol == metrics.ProtocolLegacy {
		read = fl.poll // original clients answer whole bodies: no streams (fleet_legacy.go)
	}
	if fl.closed {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	r = &fleetReader{conn: conn, stop: stop, done: make(chan struct{})}
	// Queued before the reader is in the map, so before any round that
	// names it.
	fl.touch(name)
	fl.readers[name] = r
	go func() {
		defer close(r.done)
		defer stop()
		read(ctx, name, conn)
		// A stream may end before its connection (a connector too old to
		// have one): the machine is here until the connection goes.
		select {
		case <-conn.Done():
		case <-ctx.Done():
		}
		fl.touch(name) // it was here until now
	}()
}

// close stops every reader and the touch loop, and waits until the
// readers' last touches are queued: Shutdown calls it before the store's
// queue is flushed (closeAudit) and the store closed. No reader starts
// after it. Nil-safe: a gateway without a store has no fleet.
func (fl *fleetMemory) close() {
	if fl == nil {
		return
	}
	fl.mu.Lock()
	fl.closed = true
	var done []chan struct{}
	for name, r := range fl.readers {
		r.stop()
		done = append(done, r.done)
		delete(fl.readers, name)
	}
	fl.touchWhileReading()
	fl.mu.Unlock()
	for _, d := range done {
		<-d
	}
}

// read keeps reading name's change stream over conn until the connection
// or ctx ends, reconnecting after breaks with the last id stored.
func (fl *fleetMemory) read(ctx context.Context, name string, conn presence.Conn) {
	fl.mu.Lock()
	lastID := fl.lastIDs[name]
	fl.mu.Unlock()
	wait := fleetRetryMin
	for {
		err := fl.stream(ctx, name, conn, &lastID)
		fl.mu.Lock()
		fl.lastIDs[name] = lastID
		fl.mu.Unlock()
		var old errTooOld
		switch {
		case ctx.Err() != nil, closed(conn.Done()):
			return // the connection's end is no break of its stream
		case errors.As(err, &old):
			fl.log.Info("fleet: this connector has no change stream; its threads are not remembered", "connector", name, "status", old.status)
			return
		case err != nil:
			fl.log.Warn("fleet: change stream broke", "connector", name, "err", err, "retry_in", wait.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-conn.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, fleetRetryMax)
	}
}

// touch marks name seen now: when its reader starts and when it ends,
// so that last seen is exact at both ends of a connection.
func (fl *fleetMemory) touch(name string) { fl.g.writes.seen(name) }

// touchWhileReading starts touchLoop when the first reader has started
// and stops it when the last one has gone. fl.mu is held.
func (fl *fleetMemory) touchWhileReading() {
	switch {
	case len(fl.readers) > 0 && fl.touching == nil:
		ctx, stop := context.WithCancel(context.Background())
		t := &fleetToucher{stop: stop, done: make(chan struct{})}
		fl.touching = t
		go func() {
			defer close(t.done)
			fl.touchLoop(ctx)
		}()
	case len(fl.readers) == 0 && fl.touching != nil:
		fl.touching.stop()
		fl.touching = nil
	}
}

// touchLoop marks every machine whose stream is read here seen, every
// touchEvery, in one store write, until ctx ends. One write a round
// rather than one per machine: at 10,000 connectors a touch per
// connector a minute was some 170 transactions a second, and a timer each.
func (fl *fleetMemory) touchLoop(ctx context.Context) {
	tick := time.NewTicker(fl.touchEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fl.touchReading()
		}
	}
}

// touchReading marks the machines whose readers are running seen now. A
// reader that has ended (a connector without a stream) stays in the
// map until its connector goes, but its machine is not being heard.
func (fl *fleetMemory) touchReading() {
	fl.mu.Lock()
	names := make([]string, 0, len(fl.readers))
	for name, r := range fl.readers {
		select {
		case <-r.done:
		default:
			names = append(names, name)
		}
	}
	fl.mu.Unlock()
	fl.g.writes.seen(names...)
}

// errTooOld is a connector that answered the stream's request with
// something else than a stream: one built before the fleet's memory.
type errTooOld struct{ status int }

func (e errTooOld) Error() string { return fmt.Sprintf("no change stream (status %d)", e.status) }

// received is one event read from the stream.
type received struct {
	ev  fleet.Event
	err error
}

// stream reads the change stream once, from *lastID, until it ends, and
// stores what it hears; *lastID follows what has been committed.
func (fl *fleetMemory) stream(ctx context.Context, name string, conn presence.Conn, lastID *string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://connector"+fleet.EventsPath, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := conn.RoundTrip(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // a stream read to its end or abandoned
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // let the stream finish cleanly
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return errTooOld{resp.StatusCode}
		}
		return fmt.Errorf("change stream: status %d", resp.StatusCode)
	}
	events := make(chan received, fleetQueue)
	go func() {
		defer close(events)
		d := fleet.NewDecoder(resp.Body)
		for {
			ev, err := d.Next()
			select {
			case events <- received{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// Grown by the first threads that come, not before: most streams are
	// of idle connectors, which send none after the first resync.
	var batch []store.Thread
	for {
		var first received
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case first, ok = <-events:
		}
		// Take what else has arrived, up to a batch: a resync's threads
		// come together and go into one transaction.
		batch = batch[:0]
		id := ""
		var end error
		take := func(r received, ok bool) (full bool) {
			switch {
			case !ok: // the reader gave up: ctx ended
				end = context.Canceled
				return true
			case r.err != nil:
				end = r.err
				return true
			case r.ev.Name == fleet.EventThread:
				if t, ok := fl.decode(name, r.ev.Data); ok {
					batch = append(batch, t)
				}
			}
			// Kept and sent back as Last-Event-ID: only an id of the
			// stream's form, which is short.
			if _, _, err := fleet.ParseEventID(r.ev.ID); err == nil {
				id = r.ev.ID
			}
			return r.ev.Name == fleet.EventSynced || len(batch) >= fleetBatch
		}
		for full := take(first, ok); !full; {
			select {
			case r, ok := <-events:
				full = take(r, ok)
			default:
				full = true
			}
		}
		// Queued, not waited for: the queue keeps it through an outage of
		// the store. A batch the full queue drops breaks the stream, which
		// resumes before it.
		if len(batch) > 0 && !fl.g.writes.threads(ctx, name, batch) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errStoreQueueFull
		}
		// Only what is queued is acknowledged: a break before resumes
		// before these events.
		if id != "" {
			*lastID = id
		}
		switch {
		case errors.Is(end, io.EOF):
			return errors.New("the connector ended the stream")
		case end != nil:
			return end
		}
	}
}

// decode turns a thread event into the store's form; a malformed one is
// logged (rate-limited) and skipped. The store bounds every field
// (store.SyncThreadsResult); only what cannot reach it in one piece is
// decided here.
func (fl *fleetMemory) decode(name string, data []byte) (store.Thread, bool) {
	var t fleet.Thread
	if err := json.Unmarshal(data, &t); err != nil {
		fl.g.metrics.FleetThreadRefused("malformed")
		fl.g.bounds.untrusted.Warn("fleet: skipping a malformed thread event", "connector", name, "err", err)
		return store.Thread{}, false
	}
	// Milliseconds past what a Duration holds would wrap around.
	ms := min(max(t.DurationMs, 0), int64(store.MaxDuration/time.Millisecond)+1)
	out := store.Thread{
		ID: t.ID, Workflow: t.Workflow, Status: t.Status, Prompt: t.Prompt, UpdatedAt: t.UpdatedAt,
		Duration: time.Duration(ms) * time.Millisecond, Steps: t.Steps, ReturnCode: t.ReturnCode,
		Summary: t.Summary,
	}
	if !t.StartedAt.IsZero() {
		started := t.StartedAt
		out.StartedAt = &started
	}
	out.Usage, out.Tokens, out.Cost = t.Usage, t.Tokens, t.Cost
	if w := t.Waiting; w != nil {
		// As sent: the store bounds it, and drops it beside a status
		// other than waiting.
		out.Waiting = &store.Waiting{Role: w.Role, Question: w.Question, Assignee: w.Assignee, Since: w.Since, Deadline: w.Deadline}
	}
	return out, true
}

// errStoreQueueFull is a batch of threads the store's queue dropped.
var errStoreQueueFull = errors.New("storing threads: the store's queue is full (in memory and on disk)")

// fleetBounded counts and tells (rate-limited) what the store changed of
// a connector's threads to fit its bounds, once they are written:
// threads refused, fields cut, the machine's oldest threads forgotten
// for its share.
func (g *Gateway) fleetBounded(name string, res store.SyncResult) {
	if res.Notified > 0 {
		g.notifier.wake() // the batch made notifications: send them now
	}
	m, log := g.metrics, g.bounds.untrusted
	for _, r := range res.Refused {
		m.FleetThreadRefused(r.Reason)
	}
	if len(res.Refused) > 0 {
		log.Warn("fleet: threads refused", "connector", name, "threads", len(res.Refused), "first", res.Refused[0].ID, "reason", res.Refused[0].Reason)
	}
	if len(res.Cut) > 0 {
		for field, n := range res.Cut {
			m.FleetFieldCut(field, n)
		}
		log.Warn("fleet: fields cut or corrected to fit the store's bounds", "connector", name, "fields", res.Cut)
	}
	if res.Evicted > 0 {
		m.FleetThreadsEvicted(res.Evicted)
		log.Warn("fleet: machine over its share of the store: its oldest threads forgotten", "connector", name, "threads", res.Evicted, "bytes", res.EvictedBytes)
	}
}

// closed says whether done is closed.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
