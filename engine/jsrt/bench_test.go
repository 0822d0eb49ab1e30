package jsrt

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
)

// BenchmarkStep drives a 200-step deterministic workflow through
// Start/Next/Close; steps/s is the figure of merit. The CAS lives in
// /dev/shm when there is one, so the number is the runtime's and not the
// disk's fsync.
func BenchmarkStep(b *testing.B) {
	const steps = 200
	bundle := loadTestdata(b, "ticker.esm.js")
	h := newFakeHost(b)
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "jsrt-bench-")
		if err == nil {
			// Not b.TempDir: the point is a directory in memory.
			b.Cleanup(func() { _ = os.RemoveAll(dir) })
			h = &fakeHost{store: cas.Open(dir), env: map[string]string{}}
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := bundle.Start(ctx, threadFor(bundle, "200"), h)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			out, done, err := r.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if done != nil {
				break
			}
			_ = out
			n++
		}
		if n != steps {
			b.Fatalf("%d steps", n)
		}
		_ = r.Close()
	}
	b.ReportMetric(float64(steps*b.N)/time.Since(start).Seconds(), "steps/s")
}

// BenchmarkLoadUncached is a first Load: esbuild transform, goja compile,
// validation-mode evaluation.
func BenchmarkLoadUncached(b *testing.B) {
	src := readTestdata(b, "linear.esm.js")
	for i := 0; i < b.N; i++ {
		bundleCache.reset()
		if _, err := Load(src, "linear.esm.js", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadCached is a repeated Load of the same bytes: evaluation and
// descriptor validation only.
func BenchmarkLoadCached(b *testing.B) {
	src := readTestdata(b, "linear.esm.js")
	if _, err := Load(src, "linear.esm.js", Options{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bl, err := Load(src, "linear.esm.js", Options{})
		if err != nil || !bl.FromCache() {
			b.Fatal(err)
		}
	}
}

// BenchmarkStart is the per-run cost: a fresh runtime, the bundle's top
// level, run(thread, runtime).
func BenchmarkStart(b *testing.B) {
	bundle := loadTestdata(b, "linear.esm.js")
	h := newFakeHost(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		r, err := bundle.Start(ctx, threadFor(bundle, "x"), h)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Close()
	}
}
