package proxybuf

import (
	"net/http/httputil"
	"testing"
)

var _ httputil.BufferPool = Pool

func TestBuffersAreFullSizeEvenAfterAStrayPut(t *testing.T) {
	t.Parallel()
	Pool.Put(make([]byte, 10))
	for range 3 {
		b := Pool.Get()
		if len(b) != Size {
			t.Fatalf("Get returned %d bytes, want %d", len(b), Size)
		}
		Pool.Put(b)
	}
}
