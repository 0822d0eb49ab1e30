// Package proxybuf is the one pool of copy buffers every proxy in the
// gateway shares (the relay to a connector's tunnel, the reverse proxy to
// another replica), rather than 32 KiB allocated per proxied response.
package proxybuf

import "sync"

// Size is the length of each buffer, ReverseProxy's own default.
const Size = 32 << 10

// Pool is an httputil.BufferPool of Size-byte buffers.
var Pool = &pool{p: sync.Pool{New: func() any { b := make([]byte, Size); return &b }}}

type pool struct{ p sync.Pool }

// Get returns a buffer of Size bytes.
func (b *pool) Get() []byte { return *(b.p.Get().(*[]byte)) }

// Put gives a buffer back; one of another size is dropped.
func (b *pool) Put(x []byte) {
	if len(x) == Size {
		b.p.Put(&x)
	}
}
