// Package gctune keeps a small-heap server from collecting garbage after
// every few megabytes it allocates.
//
// The collector's default (GOGC=100) starts a cycle once the heap has
// grown by as much as survived the last one. A gateway or connector keeps
// a few megabytes alive and allocates ~10 KiB per proxied request, so under
// load it ran a cycle every few hundred requests: measured on the tunnel
// benchmark, about 15% of the gateway's CPU. Headroom raises GOGC while the
// live heap is small, so that at least Headroom bytes may be allocated
// between cycles, and lowers it back to 100 as the live heap grows: a
// gateway holding thousands of connectors pays nothing extra in memory.
// A GOGC set in the environment is the operator's and is left alone.
//
// A large live heap is followed up: see recheckLarge.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Headroom is the least a server may allocate between two collections.
// The benchmark's optimum was broad (GOGC 200 to 800 for a 3 MB live heap
// all did as well); much larger heaps did worse, as fresh memory has to be
// faulted in and cleared.
const Headroom = 16 << 20

// maxPercent caps GOGC for a nearly empty heap.
const maxPercent = 1000

var (
	once    sync.Once
	percent atomic.Int64
)

// Start begins tuning, once per process, unless GOGC is set. It returns
// at once; the tuning follows each collection.
func Start() {
	once.Do(func() {
		if os.Getenv("GOGC") != "" {
			return
		}
		percent.Store(100)
		arm()
	})
}

// Percent is the GOGC in force as set by the tuner (100 before the first
// adjustment, 0 when the tuner is not running).
func Percent() int { return int(percent.Load()) }

// sentinel is garbage whose cleanup marks the end of a collection. It holds
// a pointer so the tiny allocator never batches it with other objects,
// which would delay its cleanup indefinitely.
type sentinel struct{ _ *int }

func arm() {
	runtime.AddCleanup(new(sentinel), func(struct{}) {
		adjust()
		arm()
	}, struct{}{})
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// largeLive is the live heap past which a collection is followed up
// (recheckLarge).
const largeLive = 64 << 20

// firstRecheck and lastRecheck bound the delay of the follow-up: it
// doubles while the heap stays large, so a server whose heap is large for
// good pays one extra collection per lastRecheck (the runtime's own forced
// collection comes every two minutes).
var (
	firstRecheck = 10 * time.Second
	lastRecheck  = 2 * time.Minute
)

var (
	recheckMu    sync.Mutex
	recheckTimer *time.Timer
	recheckDelay time.Duration
)

// recheckLarge follows a collection that found a large live heap. The
// heap goal (and the memory the runtime keeps) is set by the last
// collection, and an idle server may not collect again for two minutes:
// one transient allocation of a few hundred MB (a large response built
// whole, a burst of buffers) then stays resident all that time, with the
// heap goal at twice it. The follow-up collects and returns the free memory
// to the system; while the heap is still large, the next one waits twice as
// long.
func recheckLarge(live uint64) {
	recheckMu.Lock()
	defer recheckMu.Unlock()
	if live < largeLive {
		recheckDelay = 0
		return
	}
	if recheckTimer != nil {
		return // one follow-up pending is enough
	}
	recheckDelay = min(max(recheckDelay*2, firstRecheck), lastRecheck)
	recheckTimer = time.AfterFunc(recheckDelay, func() {
		recheckMu.Lock()
		recheckTimer = nil
		recheckMu.Unlock()
		// Its collection runs adjust again, which judges the heap anew.
		debug.FreeOSMemory()
	})
}

// adjust sets GOGC so the next cycle starts after max(live, Headroom)
// more bytes. It runs on the cleanup goroutine, one call at a time.
func adjust() {
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	recheckLarge(liveSample[0].Value.Uint64())
	want := PercentFor(liveSample[0].Value.Uint64())
	// Small changes are not worth the heap lock SetGCPercent takes.
	if cur := percent.Load(); want*10 > cur*9 && want*10 < cur*11 {
		return
	}
	debug.SetGCPercent(int(want))
	percent.Store(want)
}

// PercentFor is the GOGC that leaves Headroom above a live heap of live
// bytes, between 100 and maxPercent.
func PercentFor(live uint64) int64 {
	if live == 0 || live >= Headroom {
		return 100
	}
	return min(max(int64(Headroom*100/live), 100), maxPercent)
}
