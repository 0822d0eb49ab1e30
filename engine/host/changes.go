package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/threads"
)

// The host tells of each change to the threads it runs as it happens, so
// that readers (the connector's live streams and its fleet feed) wake when
// there is something to read instead of looking every so often. A change
// says only which thread moved and how: readers read what is new from the
// files as they always have, so their order and what they resume from stay
// the files', and a change that is dropped (a subscriber too slow) costs a
// read of everything, never a wrong answer.
//
// Each change is published once what it tells of is visible to readers:
// the index names the step, the log line is in the file, the host's list
// shows the new status, the thread's last state is on disk before it is
// said to have ended. A reader that subscribes first and reads second
// therefore misses nothing: what happened before it read is in what it
// read, and what happens after wakes it.
//
// In the host's process, Host.Subscribe; over the control socket,
// GET /v1/changes streams the same changes as JSON lines
// (Client.Changes). A host older than the stream answers it 404
// (ErrNoChangeStream), and its clients look for changes as they did
// before it: by polling.

// ChangeKind says what happened to a thread.
type ChangeKind string

// Kinds of change.
const (
	// ChangeSubscribed is the first line of a change stream: every change
	// from then on follows it.
	ChangeSubscribed ChangeKind = "subscribed"
	// ChangeStarted: the host took the thread on (a run, fork, resume or
	// child) and lists it as running.
	ChangeStarted ChangeKind = "started"
	// ChangeStep: a state node was written and the thread's index names it
	// as its head (Head). For the __end__ node, which the history names
	// rather than the index, the node is stored; the history names it by
	// the thread's ChangeEnded.
	ChangeStep ChangeKind = "step"
	// ChangeStatus: the thread moved between running, pausing and paused
	// (Status).
	ChangeStatus ChangeKind = "status"
	// ChangeLog: a line was appended to the thread's debug log.
	ChangeLog ChangeKind = "log"
	// ChangeEnded: the host let go of the thread, which finished, was
	// killed, failed or was left unfinished for a later resume; whatever
	// it wrote last is on disk.
	ChangeEnded ChangeKind = "ended"
	// ChangeRemoved: the thread's index and history lines were removed.
	ChangeRemoved ChangeKind = "removed"
	// ChangeLost: changes were dropped because the subscriber read too
	// slowly; it should take every thread as changed.
	ChangeLost ChangeKind = "lost"
)

// Change is one thing that happened to a thread of the host's root.
type Change struct {
	Kind       ChangeKind     `json:"kind"`
	ThreadID   string         `json:"threadId,omitempty"`
	BundleHash string         `json:"bundleHash,omitempty"`
	Head       string         `json:"head,omitempty"`   // ChangeStep
	Status     threads.Status `json:"status,omitempty"` // ChangeStarted, ChangeStatus
	// At is when the host published the change (ms since the epoch).
	At int64 `json:"at"`
}

// maxQueued bounds the changes waiting for one subscriber; past it they
// are dropped for a single ChangeLost.
const maxQueued = 4096

// changeHub is the host's list of subscribers.
type changeHub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// Subscription receives the changes the host publishes from the moment
// Subscribe returns it until Close. Ready is signalled whenever changes
// wait; Take hands them over.
type Subscription struct {
	hub   *changeHub
	ready chan struct{} // one token: changes wait

	mu    sync.Mutex
	queue []Change
	lost  bool // changes were dropped since the last Take
}

// Subscribe starts receiving the host's changes. Publishing never waits
// for a subscriber: one that falls maxQueued changes behind loses them
// (Take reports it).
func (h *Host) Subscribe() *Subscription {
	s := &Subscription{hub: &h.changes, ready: make(chan struct{}, 1)}
	h.changes.mu.Lock()
	defer h.changes.mu.Unlock()
	if h.changes.subs == nil {
		h.changes.subs = map[*Subscription]struct{}{}
	}
	h.changes.subs[s] = struct{}{}
	return s
}

// Ready is signalled when changes wait to be taken.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take returns the changes waiting, oldest first, and whether some were
// dropped before them (then every thread may have changed).
func (s *Subscription) Take() (changes []Change, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changes, lost = s.queue, s.lost
	s.queue, s.lost = nil, false
	return changes, lost
}

// Close stops the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.subs, s)
}

func (s *Subscription) add(c Change) {
	s.mu.Lock()
	if len(s.queue) < maxQueued {
		s.queue = append(s.queue, c)
	} else {
		s.queue, s.lost = nil, true
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default: // already signalled
	}
}

// publish tells every subscriber of c. It never blocks on one, so the
// executor's goroutines may call it between their writes.
func (h *Host) publish(c Change) {
	c.At = time.Now().UnixMilli()
	h.changes.mu.Lock()
	defer h.changes.mu.Unlock()
	for s := range h.changes.subs {
		s.add(c)
	}
}

// logAppended is told of every debug-log line written in this process
// (executor.WatchAppends) and publishes those of this root's threads;
// other roots' hosts may share the process (tests do), and other files
// (the usage sidecar) are written the same way.
func (h *Host) logAppended(path string) {
	dir, file := filepath.Split(path)
	id, ok := strings.CutSuffix(file, ".info.jsonl")
	bundle := filepath.Base(dir)
	if !ok || filepath.Clean(dir) != h.opts.Layout.LogsDir(bundle) {
		return
	}
	h.publish(Change{Kind: ChangeLog, ThreadID: id, BundleHash: bundle})
}

// gateStatus is the status each pause record of a gate (executor.PauseGate)
// is written at: the gate writes one at each move, with the move made
// under the lock the host's list reads the status under.
var gateStatus = map[string]threads.Status{
	executor.TagPausing: threads.StatusPausing,
	executor.TagPaused:  threads.StatusPaused,
	executor.TagResumed: threads.StatusRunning,
}

// gateLog is the log of a thread's pause gate: its debug log, and a
// status change with each pause record.
func (h *Host) gateLog(t executor.Thread) func(tag, content string) {
	dlog := executor.NewDebugLog(h.opts.Layout.InfoLog(t.BundleHash, t.ID), time.Now)
	return func(tag, content string) {
		dlog.Write(tag, content)
		if st, ok := gateStatus[tag]; ok {
			h.publish(Change{Kind: ChangeStatus, ThreadID: t.ID, BundleHash: t.BundleHash, Status: st})
		}
	}
}

// endStreams ends every change stream, as the control API shuts down: a
// stream never ends by itself, and the server waits for it otherwise.
func (h *Host) endStreams() { h.streamsEndOnce.Do(func() { close(h.streamsEnd) }) }

// serveChanges answers GET /v1/changes: ChangeSubscribed, then each change
// as a JSON line, flushed as it comes, until the client leaves or the
// host stops.
func (h *Host) serveChanges(w http.ResponseWriter, r *http.Request) {
	sub := h.Subscribe() // before the first line: nothing falls between
	defer sub.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var buf []byte
	send := func(changes ...Change) error {
		buf = buf[:0]
		for _, c := range changes {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			buf = append(append(buf, b...), '\n')
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send(Change{Kind: ChangeSubscribed, At: time.Now().UnixMilli()}) != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.streamsEnd:
			return
		case <-sub.Ready():
		}
		changes, lost := sub.Take()
		if lost {
			changes = append([]Change{{Kind: ChangeLost, At: time.Now().UnixMilli()}}, changes...)
		}
		if len(changes) > 0 && send(changes...) != nil {
			return // the client went away
		}
	}
}

// ErrNoChangeStream is returned by Client.Changes when the host is older
// than its change stream: changes have to be looked for by polling.
var ErrNoChangeStream = errors.New("the engine host has no change stream (it is older than this client)")

// changesHandshake bounds the wait for a host to begin its change stream.
const changesHandshake = 10 * time.Second

// ChangeStream is a host's changes as they happen (Client.Changes).
type ChangeStream struct {
	body   io.ReadCloser
	sc     *bufio.Scanner
	cancel context.CancelFunc
}

// Changes opens the host's change stream. It returns once the host has
// subscribed (every change from then on will be read), or
// ErrNoChangeStream from a host older than the stream. The stream lasts
// until ctx ends, Close, or the host stops; Next then fails.
func (c *Client) Changes(ctx context.Context) (*ChangeStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(changesHandshake, cancel)
	s, err := c.openChanges(ctx, cancel)
	if !timer.Stop() && err != nil {
		err = fmt.Errorf("the engine host did not begin its change stream within %s: %w", changesHandshake, err)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

func (c *Client) openChanges(ctx context.Context, cancel context.CancelFunc) (*ChangeStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/v1/changes", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)) // for the message only
		_ = resp.Body.Close()                                 // read-only
		var e apiError
		switch {
		case json.Unmarshal(b, &e) == nil && e.Error != "" && resp.StatusCode == http.StatusForbidden:
			return nil, fmt.Errorf("%w: %s", ErrRefused, e.Error)
		case json.Unmarshal(b, &e) == nil && e.Error != "":
			return nil, errors.New(e.Error)
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
			return nil, ErrNoChangeStream
		}
		return nil, fmt.Errorf("engine host: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4096), 1<<20)
	s := &ChangeStream{body: resp.Body, sc: sc, cancel: cancel}
	first, err := s.Next()
	if err == nil && first.Kind != ChangeSubscribed {
		err = fmt.Errorf("the engine host's change stream began with %q, not %q", first.Kind, ChangeSubscribed)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Next waits for the next change. It fails once the stream is over: the
// host stopped or went away, ctx ended, or Close was called.
func (s *ChangeStream) Next() (Change, error) {
	var c Change
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return c, err
		}
		return c, io.EOF
	}
	if err := json.Unmarshal(s.sc.Bytes(), &c); err != nil {
		return c, fmt.Errorf("the engine host's change stream: %w", err)
	}
	return c, nil
}

// Close ends the stream.
func (s *ChangeStream) Close() {
	s.cancel()
	_ = s.body.Close() // read-only
}
