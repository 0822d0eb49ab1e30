package membudget

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// hostRoom is the tightest of what the host process's limits leave: Go's
// memory limit beside the memory Go has mapped and not given back, and
// what the operating system says (osRoom). nil when no limit is known.
func hostRoom() *HostRoom {
	var tightest *HostRoom
	consider := func(room, limit int64, source string) {
		if tightest == nil || room < tightest.Room {
			tightest = &HostRoom{Room: room, Limit: limit, Source: source}
		}
	}
	m := goMemory()
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		// The limit counts all Go has mapped but what it gave back; free
		// pages it kept are counted and reusable.
		consider(l-(m.total-m.released)+m.free, l, "the Go memory limit")
	}
	osRoom(m.free+m.released, consider)
	return tightest
}

// goMem is what Go has mapped (total), and of it the heap pages that are
// free: kept (free) or given back to the operating system but still
// mapped (released). A new allocation reuses them before it maps more.
type goMem struct{ total, free, released int64 }

func goMemory() goMem {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return goMem{int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64()), int64(s[2].Value.Uint64())}
}
