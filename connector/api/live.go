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
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/threads"
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

	head    string       // head the cached steps end at
	sent    string       // head and engine status the client's thread-start shows
	damaged bool         // the thread-start sent says the head cannot back a status
	steps   []any        // role and result records of head
	ended   bool         // steps end with the result
	logFile os.FileInfo  // the debug log read so far, to notice a new file
	buf     bytes.Buffer // one event
}

// run polls until the thread ends, the client leaves or a write fails.
func (st *liveStream) run(ctx context.Context) {
	ping := time.NewTicker(st.s.opts.LivePing)
	defer ping.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if _, err := io.WriteString(st.w, ": ping\n\n"); err != nil || st.flush() != nil {
				return
			}
			continue
		case <-poll.C:
		}
		done, err := st.step()
		if done || err != nil {
			return
		}
		poll.Reset(st.s.opts.LivePoll)
	}
}

// step sends whatever is new and reports whether the stream is over. The
// engine is asked what runs before the head is read: a thread it no longer
// runs has written its last state by then, so "not running" and "no
// __end__ in what was read" together mean it really stopped unfinished.
func (st *liveStream) step() (done bool, err error) {
	running, engErr := st.s.running()
	rec, err := st.reread()
	switch {
	case errors.Is(err, threads.ErrNotFound): // removed meanwhile
		return true, st.done(DoneNotRunning)
	case err != nil:
		st.s.log.Warn("live: reading the thread index", "thread", st.rec.ThreadID, "err", err)
		return false, nil // try again next poll
	}
	st.rec = rec
	// The engine's word on the thread (running, paused, gone) and its head:
	// when either moves, so may the status and head the start record shows.
	shown := rec.Head + " " + string(running[rec.ThreadID].Status)
	if _, ok := running[rec.ThreadID]; !ok {
		shown += "-"
	}
	if st.pos.records == 0 || st.sent != shown {
		// Also on a reconnect's first poll: the client's copy may be old.
		status, damage := host.ThreadStatus(st.s.store, rec, running)
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
		steps, ended, err := st.s.stepRecords(rec.Head)
		if err != nil {
			st.s.log.Warn("live: reading the thread's chain", "thread", rec.ThreadID, "err", err)
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
	stopped := engErr == nil && host.Liveness(st.s.opts.Layout, running, rec) == threads.NotExecuting
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
// what names the thread now is an error: the next poll tries again.
func (st *liveStream) reread() (threads.Record, error) {
	var active, finished *threads.Record
	var damaged error
	err := threads.ScanBundle(st.s.opts.Layout, st.rec.BundleHash, threads.BundleVisitor{
		Line: func(ln threads.Line) error {
			if ln.ThreadID == st.rec.ThreadID {
				r := ln.Record
				if r.Source == threads.SourceActive {
					active = &r
				} else {
					finished = &r
				}
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
	case err != nil:
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
	st.buf.Reset()
	fmt.Fprintf(&st.buf, "id: %s\nevent: %s\ndata: %s\n\n", st.pos, name, data)
	if _, err := st.w.Write(st.buf.Bytes()); err != nil {
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
// written last line waits for the next poll; a log that shrank or was
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
