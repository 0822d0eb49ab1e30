package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/host/wake"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/fleet"
)

// Live stream events.
const (
	EventRecord = "record" // a thread record (the ThreadDetail records, one at a time)
	// EventStart is the thread-start record again, when its head or its
	// status moved after it was sent as record 1. Its id is the stream
	// position as it stands (it adds no record), so a reconnect neither
	// skips nor repeats anything.
	EventStart = "start"
	EventInfo  = "info" // a debug-log line {tag, content, timestamp}
	EventDone  = "done" // the stream ends: {"reason": DoneCompleted | DoneNotRunning | DoneDamaged}
)

// Reasons of the done event.
const (
	// DoneCompleted: the thread has finished (its workflow-result was sent).
	DoneCompleted = "completed"
	// DoneNotRunning: the thread is unfinished and no engine host runs it
	// (interrupted; POST …/resume continues it), or it was removed.
	DoneNotRunning = "not-running"
	// DoneDamaged: the thread's head or start cannot back a status, and
	// no engine host is moving it on (the thread-start record's damaged
	// field says what is wrong).
	DoneDamaged = "damaged"
)

// maxInfoChunk bounds one read of the debug log; a line longer than this
// is skipped rather than stalling the stream.
const maxInfoChunk = 256 << 10

// DoneEvent is the data of the done event.
type DoneEvent struct {
	Reason string `json:"reason"`
}

// streamPos is where a live stream stands, and what its event ids say:
// "<records>:<logOffset>" — how many records have been sent (the 1-based
// index of the last one: the thread-start record is 1, the first role 2)
// and the byte offset in the debug log up to which info lines have been
// sent. Both only grow, so a client reconnecting with Last-Event-ID gets
// neither a record nor a log line twice. "<records>" alone (info from the
// start of the log) is accepted too.
type streamPos struct {
	records int
	logOff  int64
}

func (p streamPos) String() string {
	return strconv.Itoa(p.records) + ":" + strconv.FormatInt(p.logOff, 10)
}

func parseStreamPos(v string) (streamPos, error) {
	var p streamPos
	if v == "" {
		return p, nil
	}
	recs, off, hasOff := strings.Cut(strings.TrimSpace(v), ":")
	n, err := strconv.Atoi(recs)
	if err != nil || n < 0 {
		return p, fail(http.StatusBadRequest, "invalid Last-Event-ID %q: want <records> or <records>:<logOffset>", v)
	}
	p.records = n
	if hasOff {
		o, err := strconv.ParseInt(off, 10, 64)
		if err != nil || o < 0 {
			return p, fail(http.StatusBadRequest, "invalid Last-Event-ID %q: want <records> or <records>:<logOffset>", v)
		}
		p.logOff = o
	}
	return p, nil
}

// live streams a thread as server-sent events: the thread-start record,
// each step as it is written, debug-log lines, and done when the thread
// ends or nothing runs it. Unknown threads get a JSON 404 before the
// stream starts. The handler returns when the client goes away.
func (s *server) live(c echo.Context) error {
	id := c.Param("id")
	if s.opts.liveExit != nil {
		defer s.opts.liveExit(id)
	}
	rec, err := s.resolve(c, id)
	if err != nil {
		return err
	}
	pos, err := parseStreamPos(c.Request().Header.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// Not the echo.Response itself: its Flush panics on a writer that
	// cannot flush (a tunnel that buffers the body); the controller of the
	// writer underneath reports that as ErrNotSupported instead.
	rc := http.NewResponseController(w.Writer)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any server write timeout
	st := &liveStream{s: s, w: w, rc: rc, rec: rec, pos: pos}
	if err := st.flush(); err != nil {
		return nil
	}
	st.run(c.Request().Context())
	return nil
}

type liveStream struct {
	s   *server
	w   io.Writer
	rc  *http.ResponseController
	rec threads.Record
	pos streamPos

	head    string           // head the cached steps end at
	sent    string           // head and engine status the client's thread-start shows
	damaged bool             // the thread-start sent says the head cannot back a status
	steps   []any            // role and result records of head
	ended   bool             // steps end with the result
	logFile os.FileInfo      // the debug log read so far, to notice a new file
	buf     []byte           // one event
	live    threads.Liveness // who ran the thread at the last step
	// unsure is set by a step that could not read everything (the index,
	// the chain, or what the engine runs): the next looks soon, whatever
	// wakes it.
	unsure bool
}

// run sends what is new each time the thread may have moved (wake.go),
// until it ends, the client leaves or a write fails.
func (st *liveStream) run(ctx context.Context) {
	// Subscribed before the first step reads anything: a change made
	// after that read wakes the stream, one made before is in it.
	waker := st.s.wakes.Subscribe(st.rec.ThreadID, true)
	defer waker.Close()
	ping := time.NewTicker(st.s.opts.LivePing)
	defer ping.Stop()
	poll := time.NewTimer(time.Hour)
	poll.Stop()
	var budget logBudget
	for {
		done, err := st.step()
		if done || err != nil {
			return
		}
		var polled <-chan time.Time
		if d := st.pollEvery(); d > 0 {
			poll.Reset(d)
			polled = poll.C
		}
		var why uint32
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-ping.C:
				if _, err := io.WriteString(st.w, fleet.Ping); err != nil || st.flush() != nil {
					return
				}
			case <-waker.C:
				why = waker.Woken()
				break wait
			case <-polled:
				break wait
			}
		}
		poll.Stop()
		if why != wake.ByLog {
			continue
		}
		if d := budget.take(time.Now()); d > 0 && !st.hold(ctx, waker, poll, d) {
			return
		}
	}
}

// hold waits d before a step made for log lines, or less if something
// else (a step, a status) wakes the stream; the log lines that come
// meanwhile are read by that one step. It reports false when ctx ended.
func (st *liveStream) hold(ctx context.Context, waker *wake.Waker, timer *time.Timer, d time.Duration) bool {
	timer.Reset(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-waker.C:
			if waker.Woken() != wake.ByLog {
				return true
			}
		}
	}
}

// A stream steps at once when woken by a step, a status or the thread's
// end. Woken by debug-log lines alone, it steps at once too, unless such
// wakes have come faster than logRate for longer than a burst of
// logBurst: then each waits its turn, the lines meanwhile read together.
// A thread that floods its debug log (a workflow logging in a loop) thus
// costs each of its streams at most logRate reads a second, and never
// holds up a step.
const (
	logRate  = 100 // reads a second for log lines, in the long run
	logBurst = 50
)

// logBudget is a token bucket of reads for log lines (logRate, logBurst).
type logBudget struct {
	tokens float64
	last   time.Time
}

// take spends a read and returns how long to wait before making it.
func (b *logBudget) take(now time.Time) time.Duration {
	if b.last.IsZero() {
		b.tokens = logBurst
	} else {
		b.tokens = min(logBurst, b.tokens+now.Sub(b.last).Seconds()*logRate)
	}
	b.last = now
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / logRate * float64(time.Second))
}

// pollEvery is how long the stream may wait for a wake before it looks by
// itself: 0 (never) while the host tells of the thread's changes.
func (st *liveStream) pollEvery() time.Duration {
	d := st.s.pollEvery(st.live == threads.ExecutingElsewhere)
	if st.unsure && (d == 0 || d > st.s.opts.LivePoll) {
		d = st.s.opts.LivePoll
	}
	return d
}

// step sends whatever is new and reports whether the stream is over. The
// engine is asked what runs before the head is read (host.Sighting): a
// thread it no longer runs has written its last state by then, so "not
// running" and "no __end__ in what was read" together mean it really
// stopped unfinished.
func (st *liveStream) step() (done bool, err error) {
	seen := host.Sight(st.s.running)
	rec, err := st.reread()
	switch {
	case errors.Is(err, threads.ErrNotFound): // removed meanwhile
		return true, st.done(DoneNotRunning)
	case err != nil:
		st.s.log.Warn("live: reading the thread index", "thread", st.rec.ThreadID, "err", err)
		st.unsure = true
		return false, nil // try again soon
	}
	st.rec = rec
	// The engine's word on the thread (running, paused, gone) and its head:
	// when either moves, so may the status and head the start record shows.
	live := seen.Liveness(st.s.opts.Layout, rec)
	st.unsure = seen.Err() != nil
	shown := fmt.Sprintf("%s %d", rec.Head, live)
	if st.pos.records == 0 || st.sent != shown {
		// Also on a reconnect's first poll: the client's copy may be old.
		status, damage := threads.ReadStatus(st.s.store, rec, live) // the liveness just judged
		start := st.s.threadStart(rec, status, damage)
		if st.pos.records == 0 {
			err = st.record(start)
		} else {
			err = st.startEvent(start)
		}
		if err != nil {
			return true, err
		}
		if damage != nil && !st.damaged {
			st.s.log.Warn("live: thread's head cannot back a status", "path", damage.Path, "line", damage.Line, "reason", damage.Reason)
		}
		st.sent, st.damaged = shown, damage != nil
	}
	if st.damaged {
		// No step can be trusted from a head that is not sound; the head
		// is judged again when it moves.
		st.head, st.steps, st.ended = "", nil, false
	} else if rec.Head != st.head {
		steps, ended, err := st.stepsTo(rec.Head)
		if err != nil {
			st.s.log.Warn("live: reading the thread's chain", "thread", rec.ThreadID, "err", err)
			st.unsure = true
			return false, nil
		}
		// A step's model calls are counted before its state is written, so
		// a step record carries its usage from the first time it is sent.
		if _, err := st.s.addUsage(rec, steps); err != nil {
			st.s.log.Warn("live: reading the thread's model usage", "thread", rec.ThreadID, "err", err)
		}
		st.head, st.steps, st.ended = rec.Head, steps, ended
	}
	// Record k (1-based) is steps[k-2]: record 1 is the thread-start.
	for st.pos.records-1 < len(st.steps) {
		if err := st.record(st.steps[st.pos.records-1]); err != nil {
			return true, err
		}
	}
	if err := st.info(); err != nil {
		return true, err
	}
	st.live = live
	stopped := !st.unsure && st.live == threads.NotExecuting
	switch {
	case st.ended:
		return true, st.done(DoneCompleted)
	case st.damaged && (rec.Source == threads.SourceHistory || stopped):
		return true, st.done(DoneDamaged)
	case rec.Source == threads.SourceHistory:
		return true, st.done(DoneCompleted)
	case stopped:
		return true, st.done(DoneNotRunning)
	}
	return false, nil
}

// stepsTo returns the records of the chain ending at head, as
// stepRecords does, reading only the states written since the stream last
// read it: a thread's head moves on along its chain, so the states from
// head back to the head read last are the new ones, and the records
// before them are those read already. A head whose chain does not pass
// through the last one (which a run never writes), or a state that cannot
// be read on the way, has the whole chain read again.
func (st *liveStream) stepsTo(head string) (records []any, ended bool, err error) {
	if st.head == "" || st.ended {
		return st.s.stepRecords(head)
	}
	var frames []threads.Frame
	seen := map[string]bool{}
	h := head
	for h != "" && h != st.head && !seen[h] {
		seen[h] = true
		n, err := st.s.store.GetNode(h)
		if err != nil {
			return st.s.stepRecords(head)
		}
		state, ok := n.(node.State)
		if !ok {
			break
		}
		frames = append(frames, threads.Frame{Hash: h, State: state})
		h = ""
		if len(state.Payload.Ancestors) > 0 {
			h = state.Payload.Ancestors[0]
		}
	}
	if h != st.head {
		return st.s.stepRecords(head)
	}
	slices.Reverse(frames)
	records, ended = st.s.frameRecords(slices.Clone(st.steps), frames)
	return records, ended, nil
}

// startEvent sends the thread-start record again, as it stands now.
func (st *liveStream) startEvent(start ThreadStartRecord) error {
	data, err := json.Marshal(start)
	if err != nil {
		return err
	}
	return st.event(EventStart, data)
}

// reread looks the thread up again, in its own bundle only (a thread never
// changes bundle): the active index, then the history, with the line it is
// read from (where a damaged head is named). A damaged file that may be
// what names the thread now is an error: the next step tries again.
func (st *liveStream) reread() (threads.Record, error) {
	var active, finished *threads.Record
	var damaged error
	err := threads.ScanBundle(st.s.opts.Layout, st.rec.BundleHash, threads.BundleVisitor{
		Line: func(ln threads.Line) error {
			if ln.ThreadID == st.rec.ThreadID {
				r := ln.Record
				if r.Source == threads.SourceActive {
					active = &r
					// Nothing read after it can change the answer: the
					// history, which grows with every thread the bundle
					// ran, is not read for a thread that runs (this is
					// done at every change the thread makes).
					return errFoundActive
				}
				finished = &r
			}
			return nil
		},
		Damaged: func(d *threads.DamageError) {
			if damaged == nil {
				damaged = d
			}
		},
	})
	switch {
	case err != nil && !errors.Is(err, errFoundActive):
		return st.rec, err
	case active != nil:
		return *active, nil
	case finished != nil:
		return *finished, nil
	case damaged != nil:
		return st.rec, damaged
	}
	return st.rec, fmt.Errorf("%w: %s", threads.ErrNotFound, st.rec.ThreadID)
}

// errFoundActive stops reread's scan at the thread's active line.
var errFoundActive = errors.New("found in the active index")

// record sends the next record.
func (st *liveStream) record(r any) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	st.pos.records++
	return st.event(EventRecord, data)
}

func (st *liveStream) done(reason string) error {
	data, _ := json.Marshal(DoneEvent{Reason: reason})
	return st.event(EventDone, data)
}

// event writes one event with the stream position as its id, and flushes.
func (st *liveStream) event(name string, data []byte) error {
	st.buf = fleet.AppendEvent(st.buf[:0], fleet.Event{ID: st.pos.String(), Name: name, Data: data})
	if _, err := st.w.Write(st.buf); err != nil {
		return err
	}
	return st.flush()
}

func (st *liveStream) flush() error {
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// info sends the debug-log lines written since the last call. A partly
// written last line waits for the next step (its end wakes the stream); a log that shrank or was
// replaced is read again from its start; lines that are not JSON objects
// are skipped.
func (st *liveStream) info() error {
	f, err := os.Open(st.s.opts.Layout.InfoLog(st.rec.BundleHash, st.rec.ThreadID))
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }() // opened read-only
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	if (st.logFile != nil && !os.SameFile(st.logFile, fi)) || fi.Size() < st.pos.logOff {
		st.pos.logOff = 0
	}
	st.logFile = fi
	buf := make([]byte, 0, 4096)
	for st.pos.logOff < fi.Size() {
		n := min(fi.Size()-st.pos.logOff, maxInfoChunk)
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		read, err := f.ReadAt(buf, st.pos.logOff)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil
		}
		buf = buf[:read]
		end := bytes.LastIndexByte(buf, '\n')
		if end < 0 {
			if int64(read) == maxInfoChunk { // one enormous line: skip it
				st.pos.logOff += maxInfoChunk
				continue
			}
			return nil
		}
		for _, line := range bytes.Split(buf[:end], []byte{'\n'}) {
			st.pos.logOff += int64(len(line)) + 1
			var data bytes.Buffer
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) == 0 || trimmed[0] != '{' || json.Compact(&data, trimmed) != nil {
				continue
			}
			if err := st.event(EventInfo, data.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}
