package api

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/host/wake"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/fleet"
)

// GET /api/events is the machine's change stream for the gateway's fleet
// memory, as shared/fleet describes: reset, every thread, synced, then
// each thread again as it changes; with a Last-Event-ID this process gave
// out, only what changed since.
//
// One feed per API notices changes the way the live route does (wake.go):
// while a stream is open, a follower refreshes it each time the engine
// host tells of a change to a thread (debug-log lines aside), and on a
// timer only where nothing can tell (server.pollEvery). A refresh stats
// each bundle's index and history files and reads only those that
// changed. With the host's change stream open, the timer does no more
// than those stats, every SlowPoll, for changes no host tells of (the
// original engine's worker on a shared root, `doctor --fix`, a hand
// edit), and refreshes only when they moved. The feed keeps, for every
// thread, where it stands (head, status) and the sequence number of its
// last change, in a log ordered by that number; a stream keeps only the
// number it has reached and walks the log from there a page at a time, so
// a client costs next to nothing however many threads there are. Summaries
// are built when they are sent, from the same functions GET /api/threads
// and the live route use.

// eventsPage is how many threads a stream takes from the log at a time.
const eventsPage = 256

// feed is the API's thread change log, shared by every event stream.
type feed struct {
	s        *server
	instance string

	// refreshMu makes one refresh at a time read the indexes.
	refreshMu sync.Mutex
	bundles   map[string]bundleStamp // by bundle hash; guarded by refreshMu
	// lastRunning is what the engine said at the last poll (thread id →
	// status): while it says the same, no thread's liveness moved and the
	// active threads need not be looked at.
	lastRunning map[string]threads.Status

	mu      sync.Mutex
	seq     uint64                // the last change's number
	entries map[string]*feedEntry // by thread id
	log     []logItem             // changes by seq; stale items are skipped
	stale   int                   // items of log whose entry changed again or went
	changed chan struct{}         // closed (and replaced) at every change

	// followers counts the open streams; the first starts the follower
	// (follow), the last stops it with unfollow.
	followMu  sync.Mutex
	followers int
	unfollow  func()
}

// feedGap is the least time between two refreshes the follower makes, so
// that a burst of changes (a fast thread's steps) costs one read of the
// indexes, not one per change.
const feedGap = 10 * time.Millisecond

// feedEntry is where a thread stood at its last change.
type feedEntry struct {
	rec    threads.Record
	status threads.Status
	live   threads.Liveness
	seq    uint64
}

// logItem is one change in the log: entry e changed at seq (stale when
// e.seq has moved on since, or e was removed).
type logItem struct {
	seq uint64
	e   *feedEntry
}

// bundleStamp is what a bundle's index files looked like at the last poll.
type bundleStamp struct {
	index   os.FileInfo   // threads.json; nil when missing
	history []os.FileInfo // history/*.jsonl, by name
	// logs is the bundle's logs directory, which changes when a running
	// marker comes or goes: the original engine's worker starting or
	// stopping a thread changes its status (host.Liveness).
	logs os.FileInfo
}

func newFeed(s *server) *feed {
	return &feed{
		s: s, instance: fleet.NewInstance(), bundles: map[string]bundleStamp{},
		entries: map[string]*feedEntry{}, changed: make(chan struct{}),
	}
}

// sameFile says whether a and b are the same unchanged file (both nil
// counts as the same).
func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Name() == b.Name() && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

func (b bundleStamp) equal(o bundleStamp) bool {
	if !sameFile(b.index, o.index) || !sameFile(b.logs, o.logs) || len(b.history) != len(o.history) {
		return false
	}
	for i := range b.history {
		if !sameFile(b.history[i], o.history[i]) {
			return false
		}
	}
	return true
}

// stamp stats a bundle's index and history files. Index writes replace the
// file (a new inode) and history writes append (a new size), so a change
// always shows even within the file system's timestamp granularity.
func (f *feed) stamp(hash string) bundleStamp {
	dir := f.s.opts.Layout.BundleDir(hash)
	var st bundleStamp
	if fi, err := os.Stat(threads.IndexFile(dir)); err == nil {
		st.index = fi
	}
	if fi, err := os.Stat(f.s.opts.Layout.LogsDir(hash)); err == nil {
		st.logs = fi
	}
	entries, err := os.ReadDir(threads.HistoryDir(dir))
	if err != nil {
		return st
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			st.history = append(st.history, fi)
		}
	}
	return st
}

// follow returns once the feed is followed (kept current by a goroutine
// that waits for changes) and a function to call when the caller's stream
// ends. The follower subscribes before the caller's first refresh.
func (f *feed) follow() (release func()) {
	f.followMu.Lock()
	defer f.followMu.Unlock()
	f.followers++
	if f.followers == 1 {
		waker := f.s.wakes.Subscribe("", false)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.followChanges(ctx, waker)
		}()
		f.unfollow = func() {
			cancel()
			<-done
			waker.Close()
		}
	}
	return func() {
		f.followMu.Lock()
		defer f.followMu.Unlock()
		f.followers--
		if f.followers == 0 {
			f.unfollow()
			f.unfollow = nil
		}
	}
}

// followChanges refreshes the feed when woken, or when its timer says to
// look (server.pollEvery), until ctx ends.
func (f *feed) followChanges(ctx context.Context, waker *wake.Waker) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		d := f.s.pollEvery(false)
		told := d == 0 // the host tells of its threads' changes
		if told {
			d = f.s.opts.SlowPoll // to look for changes no one tells of
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-waker.C:
			f.refresh()
		case <-timer.C:
			if !told || f.filesMoved() {
				f.refresh()
			}
		}
		timer.Stop()
		select {
		case <-ctx.Done():
			return
		case <-time.After(feedGap):
		}
	}
}

// filesMoved says, from the stats a refresh starts with and nothing more,
// whether the indexes changed since the last refresh read them: a change
// no host told of — the original engine's worker on a root shared with it,
// a command such as `doctor --fix`, a hand edit.
func (f *feed) filesMoved() bool {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	hashes, err := threads.BundleHashes(f.s.opts.Layout)
	if err != nil || len(hashes) != len(f.bundles) {
		return true
	}
	for _, h := range hashes {
		if old, ok := f.bundles[h]; !ok || !old.equal(f.stamp(h)) {
			return true
		}
	}
	return false
}

// refresh reads the indexes and records what changed.
func (f *feed) refresh() {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	// The engine is asked first, as the live route does (host.Sighting): a
	// thread it no longer runs has written its last state by the time the
	// index is read.
	seen := host.Sight(f.s.running)
	running, engErr := seen.Running(), seen.Err()
	if engErr != nil {
		f.s.log.Warn("events: engine host did not say which threads run", "err", engErr)
	}
	hashes, err := threads.BundleHashes(f.s.opts.Layout)
	if err != nil {
		f.s.log.Warn("events: listing bundles", "err", err)
		return
	}
	present := map[string]bool{}
	var changed []threads.Record // new or moved threads of changed bundles
	var listed []string          // bundles read again
	for _, h := range hashes {
		present[h] = true
		st := f.stamp(h)
		if old, ok := f.bundles[h]; ok && old.equal(st) {
			continue
		}
		recs, damaged, err := threads.ListBundleTolerant(f.s.opts.Layout, h)
		if err != nil {
			f.s.log.Warn("events: reading a thread index", "bundle", h, "err", err)
			continue // the stamp stays old: read again next poll
		}
		for _, d := range damaged {
			f.s.log.Warn("events: damaged thread index: its threads are left out", "path", d.Path, "line", d.Line, "reason", d.Reason)
		}
		f.bundles[h] = st
		listed = append(listed, h)
		changed = append(changed, recs...)
	}
	for h := range f.bundles {
		if !present[h] {
			delete(f.bundles, h)
			listed = append(listed, h)
		}
	}
	liveKnown := engErr == nil
	moved := liveKnown && !sameRunning(f.lastRunning, running)
	if liveKnown {
		f.lastRunning = map[string]threads.Status{}
		for id, r := range running {
			f.lastRunning[id] = r.Status
		}
	}
	if len(listed) == 0 && !moved {
		return // nothing on disk or in the engine changed
	}
	f.apply(listed, changed, seen, liveKnown, moved)
}

// sameRunning says whether the engine runs the same threads, in the same
// states, as last time.
func sameRunning(last map[string]threads.Status, now map[string]host.RunningThread) bool {
	if last == nil || len(last) != len(now) {
		return false
	}
	for id, r := range now {
		if st, ok := last[id]; !ok || st != r.Status {
			return false
		}
	}
	return true
}

// apply records the threads of the listed bundles (recs: all of them, as
// read) and, when the engine's answer moved, the liveness of every active
// thread; a thread whose head, source or liveness moved gets a new change
// number.
func (f *feed) apply(listed []string, recs []threads.Record, sighting *host.Sighting, liveKnown, liveMoved bool) {
	type update struct {
		rec    threads.Record
		live   threads.Liveness
		status threads.Status
		e      *feedEntry
	}
	var updates []update
	seen := map[string]bool{}
	gone := map[string]bool{} // bundles read again: their threads not seen went
	for _, h := range listed {
		gone[h] = true
	}
	f.mu.Lock()
	for _, r := range recs {
		seen[r.ThreadID] = true
		e := f.entries[r.ThreadID]
		live := sighting.Liveness(f.s.opts.Layout, r)
		switch {
		case r.Source != threads.SourceActive:
			// A finished thread's status does not depend on the engine,
			// which may still list it for a moment after its history line
			// is written: that moment must not make it a change to send.
			live = threads.NotExecuting
		case e != nil && !liveKnown:
			live = e.live
		}
		if e != nil && e.rec == r && e.live == live {
			continue
		}
		updates = append(updates, update{rec: r, live: live, e: e})
	}
	if liveMoved {
		for _, e := range f.entries {
			if seen[e.rec.ThreadID] || gone[e.rec.BundleHash] || e.rec.Source != threads.SourceActive {
				continue
			}
			if live := sighting.Liveness(f.s.opts.Layout, e.rec); live != e.live {
				updates = append(updates, update{rec: e.rec, live: live, e: e})
			}
		}
	}
	removed := 0
	for id, e := range f.entries {
		if len(gone) == 0 {
			break
		}
		if gone[e.rec.BundleHash] && !seen[id] {
			delete(f.entries, id)
			e.seq = 0 // its log item is stale
			f.stale++
			removed++
		}
	}
	f.mu.Unlock()
	// Statuses read the head node: outside the lock, so streams sending
	// meanwhile are not held up. A head that cannot back a status is sent
	// as damaged, never as the status it used to have.
	for i := range updates {
		u := &updates[i]
		var d *threads.DamageError
		if u.status, d = threads.ReadStatus(f.s.store, u.rec, u.live); d != nil {
			f.s.log.Warn("events: thread's head cannot back a status: sent as damaged", "path", d.Path, "line", d.Line, "reason", d.Reason)
		}
	}
	if len(updates) == 0 && removed == 0 {
		return
	}
	f.mu.Lock()
	for _, u := range updates {
		e := u.e
		if e == nil {
			e = &feedEntry{}
			f.entries[u.rec.ThreadID] = e
		} else if e.seq != 0 {
			f.stale++
		}
		f.seq++
		e.rec, e.live, e.status, e.seq = u.rec, u.live, u.status, f.seq
		f.log = append(f.log, logItem{seq: f.seq, e: e})
	}
	f.compact()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// compact drops the stale items once they are half the log, so the log
// stays within twice the number of threads. Callers hold f.mu.
func (f *feed) compact() {
	if f.stale < 64 || f.stale < len(f.log)/2 {
		return
	}
	kept := make([]logItem, 0, len(f.log)-f.stale)
	for _, it := range f.log {
		if it.e.seq == it.seq {
			kept = append(kept, it)
		}
	}
	f.log, f.stale = kept, 0
}

// pending is one thread to send.
type pending struct {
	rec    threads.Record
	status threads.Status
	seq    uint64
}

// since returns up to eventsPage threads whose last change is after seq,
// oldest change first; upTo is the newest change number when none are
// left (the stream has caught up to it), and wake is closed at the next
// change.
func (f *feed) since(seq uint64) (out []pending, upTo uint64, wake <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := sort.Search(len(f.log), func(i int) bool { return f.log[i].seq > seq })
	for ; i < len(f.log) && len(out) < eventsPage; i++ {
		it := f.log[i]
		if it.e.seq != it.seq {
			continue
		}
		out = append(out, pending{rec: it.e.rec, status: it.e.status, seq: it.seq})
	}
	return out, f.seq, f.changed
}

// resumable says whether a stream can go on from Last-Event-ID v: an id of
// this process that it has given out. Every thread's last change is kept,
// so any such id can be resumed from.
func (f *feed) resumable(v string) (uint64, bool) {
	if v == "" {
		return 0, false
	}
	inst, seq, err := fleet.ParseEventID(v)
	if err != nil || inst != f.instance {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return seq, seq <= f.seq
}

// summary builds the wire summary of a thread, from the functions
// GET /api/threads and the live route use, with what its model calls
// used (package usage) priced at prices.
func (s *server) summary(p pending, names map[string]string, prices registry.Prices) fleet.Thread {
	start := s.threadStart(p.rec, p.status, nil)
	wf := names[p.rec.BundleHash]
	if wf == "" {
		wf = start.Workflow
	}
	out := fleet.Thread{
		ID: p.rec.ThreadID, Workflow: wf, Status: string(p.status),
		StartedAt: time.UnixMilli(start.Timestamp).UTC(), UpdatedAt: time.UnixMilli(p.rec.UpdatedAt).UTC(),
		DurationMs: max(0, p.rec.UpdatedAt-start.Timestamp),
	}
	if p := listedPrompt(start.Prompt); p != nil {
		out.Prompt = *p
	}
	if p.status == threads.StatusWaiting {
		out.Waiting = s.waitingOf(p.rec)
	}
	var frames []threads.Frame
	if p.status != threads.StatusDamaged { // no step can be trusted from an unsound head
		var err error
		if frames, err = threads.Walk(s.store, p.rec.Head); err != nil {
			s.log.Warn("events: reading a thread's chain", "thread", p.rec.ThreadID, "err", err)
		}
	}
	for _, fr := range frames {
		switch fr.State.Payload.Role {
		case node.RoleFork:
		case node.RoleEnd:
			rc := fr.State.ReturnCode()
			out.ReturnCode, out.Summary = &rc, fr.State.Summary()
		default:
			out.Steps++
		}
	}
	if spent := s.threadUsage(p.rec, prices); spent != nil {
		out.Tokens = spent.TotalTokens
		if spent.CostUSD != nil {
			out.Cost = *spent.CostUSD
		}
		out.Usage, _ = json.Marshal(spent) // plain numbers and strings always marshal
	}
	return out
}

// serve is GET /api/events (shared/fleet). The handler returns when
// the client goes away or a write fails.
func (f *feed) serve(c echo.Context) error {
	s := f.s
	defer f.follow()() // before the first refresh: a change after it wakes the follower
	f.refresh()
	cursor, resume := f.resumable(c.Request().Header.Get("Last-Event-ID"))
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w.Writer)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any server write timeout
	flush := func() error {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	var buf []byte
	send := func(ev fleet.Event) error {
		buf = fleet.AppendEvent(buf[:0], ev)
		_, err := w.Write(buf)
		return err
	}
	if !resume {
		cursor = 0
		data, _ := json.Marshal(fleet.Reset{Instance: f.instance})
		if send(fleet.Event{ID: fleet.FormatEventID(f.instance, 0), Name: fleet.EventReset, Data: data}) != nil {
			return nil
		}
	}
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	// A server shutting down waits for the requests in flight, and this
	// one never ends by itself: end it when shutdown begins (through the
	// tunnel, that is the connector stopping; the gateway reconnects to the
	// next connection with Last-Event-ID).
	if hs, ok := ctx.Value(http.ServerContextKey).(*http.Server); ok {
		hs.RegisterOnShutdown(cancel)
	}
	ping := time.NewTicker(s.opts.LivePing)
	defer ping.Stop()
	synced := false
	for {
		batch, upTo, wake := f.since(cursor)
		if len(batch) > 0 {
			if err := f.sendBatch(ctx, batch, send, &cursor); err != nil {
				return nil
			}
			if flush() != nil {
				return nil
			}
			continue
		}
		if !synced {
			synced = true
			if send(fleet.Event{ID: fleet.FormatEventID(f.instance, upTo), Name: fleet.EventSynced, Data: []byte("{}")}) != nil || flush() != nil {
				return nil
			}
		}
		cursor = max(cursor, upTo)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-ping.C:
			if _, err := w.Write([]byte(fleet.Ping)); err != nil || flush() != nil {
				return nil
			}
		}
	}
}

// sendBatch sends one page of threads, moving cursor past each.
func (f *feed) sendBatch(ctx context.Context, batch []pending, send func(fleet.Event) error, cursor *uint64) error {
	names := map[string]string{}
	var prices registry.Prices // read once a batch, not once a thread
	if reg, err := registry.Load(f.s.opts.Layout.RegistryFile()); err == nil {
		names = reg.BundleNames()
		if c := reg.Config(); c != nil {
			prices = c.Prices
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		f.s.log.Warn("events: reading the workflow registry", "err", err)
	}
	for _, p := range batch {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		data, err := json.Marshal(f.s.summary(p, names, prices))
		if err != nil {
			return err
		}
		if err := send(fleet.Event{ID: fleet.FormatEventID(f.instance, p.seq), Name: fleet.EventThread, Data: data}); err != nil {
			return err
		}
		*cursor = p.seq
	}
	return nil
}
