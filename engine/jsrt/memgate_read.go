package jsrt

import (
	"errors"
	"io"

	"github.com/uncaged/workflow/engine/membudget"
)

// Data a script asks the host to read whole — a file, a response body, a
// child's output — has a size the script does not choose and the host
// learns only by reading: /dev/zero never ends. It is read into one
// buffer that grows only after the run's account has reserved the
// growth, so the read fails with the refusal instead of taking the host.

// readAll reads r to its end. hint is the size the data says it has (a
// file's size, a Content-Length; <= 0 unknown), reserved before anything
// is read; more than that is reserved as it comes.
func readAll(acct *membudget.Account, r io.Reader, hint int64) ([]byte, error) {
	var g growth
	if hint > 0 {
		if err := g.grow(acct, hint+1); err != nil {
			return nil, err
		}
	}
	for {
		if len(g.buf) == cap(g.buf) {
			if err := g.grow(acct, nextCap(cap(g.buf))); err != nil {
				return nil, err
			}
		}
		n, err := r.Read(g.buf[len(g.buf):cap(g.buf)])
		g.buf = g.buf[:len(g.buf)+n]
		if errors.Is(err, io.EOF) {
			return g.buf, nil
		}
		if err != nil {
			return g.buf, err
		}
	}
}

// nextCap is the capacity a full buffer of capacity c grows to: doubling
// while small, by a quarter when large, so that the last growth asks for
// little more than the data needs.
func nextCap(c int) int64 {
	switch {
	case c < 32<<10:
		return 32 << 10
	case c < 64<<20:
		return 2 * int64(c)
	}
	return int64(c) + int64(c)/4
}

// growth is a buffer whose growth is reserved first.
type growth struct {
	buf []byte
}

// grow gives the buffer capacity c (if it has less), reserving all of
// it: while it is copied, the old backing array is held too.
func (g *growth) grow(acct *membudget.Account, c int64) error {
	if c <= int64(cap(g.buf)) {
		return nil
	}
	if err := acct.Reserve(c); err != nil {
		return err
	}
	nb := make([]byte, len(g.buf), c)
	copy(nb, g.buf)
	g.buf = nb
	return nil
}

// boundedOutput collects a child's output for spawnSync: at most limit
// bytes (maxBuffer; < 0 none) and what the run's account lets it reserve.
// Past either it stops collecting, records why, and calls stop (which
// kills the child); what the child still writes is discarded.
type boundedOutput struct {
	acct  *membudget.Account
	limit int64
	stop  func()
	g     growth
	// over is set once maxBuffer was passed, refused once the account
	// refused a growth.
	over    bool
	refused error
}

func (b *boundedOutput) Write(p []byte) (int, error) {
	if b.over || b.refused != nil {
		return len(p), nil
	}
	take := p
	if b.limit >= 0 && int64(len(b.g.buf)+len(p)) > b.limit {
		take = p[:max(b.limit-int64(len(b.g.buf)), 0)]
		b.over = true
	}
	if need := len(b.g.buf) + len(take); need > cap(b.g.buf) {
		if err := b.g.grow(b.acct, max(int64(need), nextCap(cap(b.g.buf)))); err != nil {
			b.refused = err
			b.stop()
			return len(p), nil
		}
	}
	b.g.buf = append(b.g.buf, take...)
	if b.over {
		b.stop()
	}
	return len(p), nil
}

// Bytes is what was collected.
func (b *boundedOutput) Bytes() []byte { return b.g.buf }
