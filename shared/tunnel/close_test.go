package tunnel

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestCloseReportsAStallExactlyWhenTheQueueCannotBeDelivered: Close
// sends what is queued and reports a stall (Err) if, and only if, the
// peer stopped taking it. The carrier is net.Pipe, which buffers nothing:
// what the peer has not read is still ours, so the test knows exactly
// what can be delivered, where a TCP socket's buffers (grown by the
// kernel as it likes) hide it. Each case draws how much is written, in
// what pieces, how much of it the peer reads before it stops, and how
// many Close calls race; the seed is logged to replay a failure.
func TestCloseReportsAStallExactlyWhenTheQueueCannotBeDelivered(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range 60 {
		total := 1 + rng.IntN(2*maxPending+MaxMessage)
		var take int
		switch rng.IntN(4) {
		case 0:
			take = 0 // never reads
		case 1:
			take = total // reads exactly what is sent
		case 2:
			take = total + 1 + rng.IntN(1000) // would read more
		default:
			take = rng.IntN(total) // stops part way
		}
		closers := 1 + rng.IntN(3)
		checkCloseReport(t, i, rng, total, take, closers)
	}
}

// checkCloseReport runs one case of the test above.
func checkCloseReport(t *testing.T, i int, rng *rand.Rand, total, take, closers int) {
	t.Helper()
	ours, peer := net.Pipe()
	defer func() { _ = peer.Close() }() // a pipe's Close cannot fail
	c := newCoalescingConn(ours, func() { _ = ours.Close() }, 0)
	deliverable := take >= total
	// A peer that reads to the end gets all the time it needs; one that
	// stopped is given up on soon, the sooner the faster the test.
	c.flushTimeout = time.Minute
	if !deliverable {
		c.flushTimeout = 10 * time.Millisecond
	}

	var read atomic.Int64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		n, _ := io.CopyN(io.Discard, peer, int64(take))
		read.Store(n)
	}()
	var accepted atomic.Int64
	pieces := make([]int, 0, 64)
	for left := total; left > 0; {
		n := min(left, 1+rng.IntN(64<<10))
		pieces = append(pieces, n)
		left -= n
	}
	written := make(chan error, 1)
	go func() {
		for _, n := range pieces {
			if _, err := c.Write(make([]byte, n)); err != nil {
				written <- err
				return
			}
			accepted.Add(int64(n))
		}
		written <- nil
	}()

	// Close when the outcome is settled: everything accepted (the peer
	// will read it), or the peer done reading with more than it read
	// already accepted (that part can never leave).
	if deliverable {
		if err := <-written; err != nil {
			t.Fatalf("case %d: writing %d bytes to a peer that reads them: %v", i, total, err)
		}
	} else {
		testkit.WaitUntil(t, "the peer to stop and more to be queued than it took", func() bool {
			select {
			case <-readDone:
				return accepted.Load() > read.Load()
			default:
				return false
			}
		})
	}
	closed := make(chan struct{}, closers)
	for range closers {
		go func() { _ = c.Close(); closed <- struct{}{} }()
	}
	for range closers {
		<-closed
	}

	err := c.Err()
	if deliverable {
		<-readDone
		if err != nil || read.Load() != int64(total) {
			t.Fatalf("case %d: %d bytes to a peer reading %d: Err() = %v, it read %d", i, total, take, err, read.Load())
		}
		return
	}
	if !errors.Is(err, errStalled) {
		t.Fatalf("case %d: %d bytes to a peer that stopped after %d (of %d accepted): Err() = %v, want a stall", i, total, read.Load(), accepted.Load(), err)
	}
	// A writer blocked on the full queue is let go.
	if err := <-written; err == nil && accepted.Load() != int64(total) {
		t.Fatalf("case %d: the writer stopped without an error after %d of %d bytes", i, accepted.Load(), total)
	}
}
