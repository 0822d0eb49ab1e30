package cluster

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// replayKeep bounds the bytes of a request body a Replay keeps to send
// again. A replica that turns a forwarded request away (NotHeldHeader)
// does so before it reads the body, and an HTTP/2 peer lets at most its
// stream's flow-control window go unread (1 MiB for Go's server): twice
// that covers it. A body read further than this was taken by a holder
// acting on it, and is no longer kept.
const replayKeep = 2 << 20

// errAttemptCut is what the reader of an abandoned attempt gets: the
// transport that was sending it may still be reading when the next
// attempt starts from the first byte.
var errAttemptCut = errors.New("cluster: forward abandoned; its body is sent again elsewhere")

// Replay is a request body that a forward can send again, from its first
// byte, when the replica it went to did not act on it (Unreached,
// NotHeld): it keeps what it read, up to replayKeep bytes. Each attempt
// reads through a reader of its own, and a new one cuts the one before.
// Read, for whoever serves the request in the end, reads from the first
// byte after an attempt that was turned away.
type Replay struct {
	src io.ReadCloser
	// srcMu serializes reads of src: an abandoned attempt's transport
	// may still be in a read when the next attempt catches up with it.
	srcMu sync.Mutex

	mu sync.Mutex
	// kept are the first total bytes of src, while keeping, in chunks of
	// keepChunk bytes from chunkPool (Release gives them back): a
	// forwarded body costs a copy, not an allocation.
	kept    []*[]byte
	total   int // bytes read from src
	keeping bool
	current *replayReader
}

// keepChunk is the size of the chunks a Replay keeps a body in.
const keepChunk = 32 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, keepChunk); return &b }}

// keep appends b to what is kept (p.mu held).
func (p *Replay) keep(b []byte) {
	for len(b) > 0 {
		off := p.total % keepChunk
		if off == 0 {
			p.kept = append(p.kept, chunkPool.Get().(*[]byte))
		}
		n := copy((*p.kept[len(p.kept)-1])[off:], b)
		b = b[n:]
		p.total += n
	}
}

// drop gives back what is kept and keeps nothing more (p.mu held).
func (p *Replay) drop() {
	for _, c := range p.kept {
		chunkPool.Put(c)
	}
	p.kept, p.keeping = nil, false
}

// Release gives back what the body kept, once nothing is to send it
// again; a reader that needed it fails from then on.
func (p *Replay) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop()
}

type replayReader struct {
	p    *Replay
	pos  int // the next byte of the body this reader gives
	cut  bool
	read bool // it gave a byte
}

// Replayable makes r's body a Replay and returns it; nil (and r
// unchanged) when r has no body.
func Replayable(r *http.Request) *Replay {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if p, ok := r.Body.(*Replay); ok {
		return p
	}
	p := &Replay{src: r.Body, keeping: true}
	r.Body = p
	return p
}

// attempt starts an attempt at sending the body: a reader from its first
// byte. The attempt before, if any, is cut.
func (p *Replay) attempt() *replayReader {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current != nil {
		p.current.cut = true
	}
	p.current = &replayReader{p: p}
	return p.current
}

// turnedAway cuts attempt a, whose replica did not act on it, so that the
// body can be sent again; false when it cannot be: more of it was read
// than was kept.
func (p *Replay) turnedAway(a *replayReader) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.keeping && p.total > 0 {
		return false
	}
	a.cut = true
	if p.current == a {
		p.current = nil
	}
	return true
}

// Read reads the body through the current attempt, or from the first
// byte when the last attempt was turned away.
func (p *Replay) Read(b []byte) (int, error) {
	p.mu.Lock()
	if p.current == nil {
		p.current = &replayReader{p: p}
	}
	r := p.current
	p.mu.Unlock()
	return r.Read(b)
}

// Close closes the body it reads.
func (p *Replay) Close() error { return p.src.Close() }

// Read gives what is kept first, then reads on from the source.
func (r *replayReader) Read(b []byte) (int, error) {
	p := r.p
	if n, done, err := r.fromKept(b); done {
		return n, err
	}
	p.srcMu.Lock()
	defer p.srcMu.Unlock()
	// Another attempt may have read on while this one waited.
	if n, done, err := r.fromKept(b); done {
		return n, err
	}
	n, err := p.src.Read(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > 0 {
		// A cut attempt's bytes are kept whatever the bound: they were
		// promised to the next attempt when this one was cut.
		if p.keeping && (p.total+n <= replayKeep || r.cut) {
			p.keep(b[:n])
		} else {
			p.drop()
			p.total += n
		}
	}
	if r.cut {
		return 0, errAttemptCut
	}
	r.pos += n
	r.read = r.read || n > 0
	return n, err
}

// fromKept is r's read when r is cut or behind the source (it gives what
// is kept); done is false when r is to read on from the source.
func (r *replayReader) fromKept(b []byte) (n int, done bool, err error) {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.cut:
		return 0, true, errAttemptCut
	case r.pos < p.total && !p.keeping:
		// Only an attempt started after the body outgrew what is kept
		// (it cannot be sent again; nothing starts one then).
		return 0, true, errAttemptCut
	case r.pos < p.total:
		chunk, off := r.pos/keepChunk, r.pos%keepChunk
		n = copy(b, (*p.kept[chunk])[off:min(keepChunk, p.total-chunk*keepChunk)])
		r.pos += n
		r.read = r.read || n > 0
		return n, true, nil
	}
	return 0, false, nil
}

// Close leaves the body to the next attempt: the server closes it when
// the request ends.
func (r *replayReader) Close() error { return nil }

// wasRead says whether the attempt gave a byte of the body.
func (r *replayReader) wasRead() bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.read
}
