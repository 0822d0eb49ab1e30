package membudget

import (
	"fmt"
	"testing"
)

// BenchmarkEnterLeave is what a runtime pays each time its goroutine
// starts and stops executing (twice or three times per step).
func BenchmarkEnterLeave(b *testing.B) {
	w := newWatchdog(readMetrics, func() {})
	w.ticking = true // no goroutine: the cost of the marks alone
	a := w.Open(DefaultBudget, func(*ExceededError) {})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Enter()
		a.Leave()
	}
}

// BenchmarkTick is one sample of the watchdog: reading the runtime's
// figures and charging the open runtimes, every Interval while any is open.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("accounts=%d", n), func(b *testing.B) {
			w := newWatchdog(readMetrics, func() {})
			w.ticking = true
			for i := 0; i < n; i++ {
				a := w.Open(DefaultBudget, func(*ExceededError) {})
				a.Enter()
				if i%2 == 0 {
					a.Leave()
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.tick()
			}
		})
	}
}
