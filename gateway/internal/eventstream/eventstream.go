// Package eventstream ends the server-sent event streams a gateway
// relays — from a connector's tunnel, or from another replica — cleanly
// when the gateway stops: each ends at the end of an event, as if the
// stream were over, so its client (an EventSource, the dashboard) has
// every event it was sent whole, with the id of the last one, and
// reconnects with that id as Last-Event-ID, to another replica. Cut in
// the middle instead, the client would see a broken connection and the
// stopping gateway would wait for streams that never end.
//
// A relayed body is wrapped (Set.Wrap); the wrapper reads the upstream
// body on a goroutine of its own, so that once the set ends (Set.End) a
// read waiting for the next event returns io.EOF at once instead of
// waiting for the upstream to send something. What arrives after that
// was never handed out: the client gets it again when it resumes.
package eventstream

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/uncaged/workflow/gateway/internal/proxybuf"
)

// Is says whether h is the header of an event stream. It allocates
// nothing: the relay asks it of every answer.
func Is(h http.Header) bool {
	ct := h["Content-Type"]
	if len(ct) == 0 {
		return false
	}
	mt, _, _ := strings.Cut(ct[0], ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// Set is the event streams one gateway relays. Its methods are safe for
// concurrent use; the zero value is not usable (NewSet).
type Set struct {
	// ctx is done once End is called, or the parent's end: derived from
	// the parent's, so a Sub costs no goroutine.
	ctx context.Context
	end context.CancelFunc
	// parent, for a set made by Sub, counts this set's streams too.
	parent *Set

	mu   sync.Mutex
	open int
	// closed is closed, and replaced, whenever a stream closes: End
	// waits on it.
	closed chan struct{}
}

// NewSet returns an empty set.
func NewSet() *Set {
	return newSet(context.Background(), nil)
}

func newSet(parentEnding context.Context, parent *Set) *Set {
	ctx, end := context.WithCancel(parentEnding)
	return &Set{ctx: ctx, end: end, parent: parent, closed: make(chan struct{})}
}

// Sub returns a set within s: the streams of one connector's tunnel, which
// end on their own when that tunnel moves to another replica, and with
// every other stream when s ends. Its streams are counted in s as well.
// End the sub-set once its streams are no longer wanted (when the tunnel
// has gone): until then s keeps a reference to it.
func (s *Set) Sub() *Set {
	return newSet(s.ctx, s)
}

// Wrap returns the upstream body rc of an event stream as the relay is
// to read and close it: until End, what rc sends; after End, what rc
// sends up to the end of the next event, then io.EOF (at once when what
// was read so far ends at an event's end). Closing the wrapper closes
// rc.
func (s *Set) Wrap(rc io.ReadCloser) io.ReadCloser {
	for set := s; set != nil; set = set.parent {
		set.mu.Lock()
		set.open++
		set.mu.Unlock()
	}
	b := &body{set: s, rc: rc, atEnd: true,
		chunks: make(chan chunk), taken: make(chan struct{}, 1), gone: make(chan struct{})}
	go b.pump()
	return b
}

// Own counts in the set a stream the gateway writes itself (not a relayed
// one) until done is called. ending is closed when the set ends: the
// stream's writer, which writes whole events only, is then to stop after
// the event it is writing, and call done.
func (s *Set) Own() (ending <-chan struct{}, done func()) {
	for set := s; set != nil; set = set.parent {
		set.mu.Lock()
		set.open++
		set.mu.Unlock()
	}
	var once sync.Once
	return s.ctx.Done(), func() { once.Do(s.closeOne) }
}

// End makes every stream, those open and those wrapped later, end at its
// next event's end, and waits until each open one has been closed or ctx
// ends. It returns how many are still open then (0 when all ended).
func (s *Set) End(ctx context.Context) (open int) {
	s.end()
	for {
		s.mu.Lock()
		open, closed := s.open, s.closed
		s.mu.Unlock()
		if open == 0 {
			return 0
		}
		select {
		case <-closed:
		case <-ctx.Done():
			return open
		}
	}
}

// Open is how many wrapped streams have not been closed yet.
func (s *Set) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

func (s *Set) closeOne() {
	for set := s; set != nil; set = set.parent {
		set.mu.Lock()
		set.open--
		close(set.closed)
		set.closed = make(chan struct{})
		set.mu.Unlock()
	}
}

// chunk is what one read of the upstream body returned.
type chunk struct {
	data []byte
	err  error
}

// body is a wrapped stream. Read and Close are called by the relay's
// goroutine; pump reads rc on its own.
type body struct {
	set *Set
	rc  io.ReadCloser
	// chunks hands pump's reads over; taken gives its buffer back; gone
	// tells pump the wrapper was closed.
	chunks chan chunk
	taken  chan struct{}
	gone   chan struct{}

	pending []byte // the part of the last chunk not handed out yet
	err     error  // the upstream's error, once pending is out
	// atEnd says whether what was handed out ends at an event's end (or
	// nothing was); last are its last bytes.
	atEnd     bool
	last      [3]byte
	closeOnce sync.Once
}

// pump reads rc until it fails or the wrapper is closed. Its buffer is
// lent to Read with each chunk and taken back before the next read. It is
// its own, not the pool's: the last chunk may still be read from after
// pump has returned. A stream lives long, so that is one allocation in
// very many reads.
func (b *body) pump() {
	buf := make([]byte, proxybuf.Size)
	for {
		n, err := b.rc.Read(buf)
		select {
		case b.chunks <- chunk{buf[:n], err}:
		case <-b.gone:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-b.taken:
		case <-b.gone:
			return
		}
	}
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	for {
		ending := b.set.ctx.Done()
		select {
		case <-ending:
			if b.atEnd {
				// Over, even with more waiting: the client resumes here.
				return 0, io.EOF
			}
		default:
			ending = nil
		}
		if len(b.pending) > 0 {
			return b.handOut(p, ending != nil), nil
		}
		if b.err != nil {
			return 0, b.err
		}
		var wake <-chan struct{} // the end of the set, when it ends this stream
		if b.atEnd {
			wake = b.set.ctx.Done()
		}
		select {
		case c := <-b.chunks:
			b.pending, b.err = c.data, c.err
			if len(c.data) == 0 && c.err == nil {
				b.taken <- struct{}{} // an empty read: wait for the next
			}
		case <-wake:
		}
	}
}

// handOut copies pending bytes to p: as many as fit, or, once the set
// ends, no more than to the end of the event they are in.
func (b *body) handOut(p []byte, ending bool) int {
	n := min(len(p), len(b.pending))
	if ending {
		for i, c := range b.pending[:n] {
			if b.step(c); b.atEnd {
				n = i + 1
				break
			}
		}
	} else {
		// Whether an event ends here depends on the last bytes only.
		for _, c := range b.pending[max(0, n-len(b.last)):n] {
			b.step(c)
		}
	}
	copy(p, b.pending[:n])
	b.pending = b.pending[n:]
	if len(b.pending) == 0 && b.err == nil {
		b.taken <- struct{}{}
	}
	return n
}

// step notes one more byte handed out: whether it ends an event, which
// two line ends in a row do (a line end is CRLF, LF or CR). A CR that
// may be the first half of a CRLF already ends its line, for the client
// as for this.
func (b *body) step(c byte) {
	b.last = [3]byte{b.last[1], b.last[2], c}
	l := b.last
	isEnd := func(c byte) bool { return c == '\n' || c == '\r' }
	switch {
	case l[2] == '\n' && l[1] == '\n', l[2] == '\r' && isEnd(l[1]):
		b.atEnd = true
	case l[2] == '\n' && l[1] == '\r':
		b.atEnd = isEnd(l[0]) // CRLF after a line end
	default:
		b.atEnd = false
	}
}

// Close implements io.Closer: it closes the upstream body, which ends
// pump's read.
func (b *body) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.gone)
		err = b.rc.Close()
		b.set.closeOne()
	})
	return err
}
