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
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		consider(l-goInUse(), l, "the Go memory limit")
	}
	osRoom(consider)
	return tightest
}

// goInUse is the memory Go's memory limit counts: all Go has mapped but
// what it has returned to the operating system.
func goInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
