// Package proxybuf is the one pool of copy buffers every reverse proxy in
// the gateway shares (to a connector's tunnel, to another replica):
// httputil.ReverseProxy otherwise allocates 32 KiB per proxied response.
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
