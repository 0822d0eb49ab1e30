package store_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// The history BenchmarkSearch fills is small by default so that `go test
// -bench` stays quick; the scale run (1,000 machines × 1,000 threads) sets
// these, e.g. -args -store.machines=1000 -store.threads=1000.
var (
	benchMachines = flag.Int("store.machines", 20, "machines in BenchmarkSearch's history")
	benchThreads  = flag.Int("store.threads", 100, "threads per machine in BenchmarkSearch's history")
)

// words vary the prompts so that full-text search has something to
// choose between.
var words = []string{"deploy", "review", "payments", "database", "migration", "search", "timeout", "staging", "rollback", "cache"}

// benchThreadsFor makes n threads whose text and times vary with gen, so
// a resync with a new gen really updates every row.
func benchThreadsFor(n, gen int, base time.Time) []store.Thread {
	ts := make([]store.Thread, n)
	for i := range ts {
		ts[i] = store.Thread{
			ID:        fmt.Sprintf("thread-%06d", i),
			Workflow:  words[i%3],
			Status:    []string{"done", "failed", "running"}[i%3],
			Prompt:    fmt.Sprintf("%s the %s service, attempt %d", words[i%len(words)], words[(i/7+gen)%len(words)], gen),
			UpdatedAt: base.Add(time.Duration(i) * time.Second),
			Duration:  time.Duration(i) * time.Millisecond,
			Steps:     i % 17,
			Summary:   "finished with " + words[(i+gen)%len(words)],
			Usage:     []byte(`{"input_tokens":1200,"output_tokens":300}`),
		}
	}
	return ts
}

// BenchmarkResync1000 is a connector's full resync: 1,000 threads of one
// machine in one transaction. "changed" rewrites every row (new text and
// times); "unchanged" repeats what is stored, the common case.
func BenchmarkResync1000(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s := open(b, be.cfg(b))
			base := time.Now()
			if err := s.SyncThreads(ctx, "m", benchThreadsFor(1000, 0, base)); err != nil {
				b.Fatal(err)
			}
			b.Run("changed", func(b *testing.B) {
				gen := 0
				for b.Loop() {
					gen++
					if err := s.SyncThreads(ctx, "m", benchThreadsFor(1000, gen, base.Add(time.Duration(gen)*time.Hour))); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("unchanged", func(b *testing.B) {
				same := benchThreadsFor(1000, 0, base)
				if err := s.SyncThreads(ctx, "m", same); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := s.SyncThreads(ctx, "m", same); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// openBenchHistory opens a store with a history of -store.machines ×
// -store.threads threads, the oldest a day before base, which it returns.
func openBenchHistory(b *testing.B, cfg store.Config) (store.Store, time.Time) {
	b.Helper()
	s := open(b, cfg)
	base := time.Now().Add(-24 * time.Hour)
	for m := range *benchMachines {
		if err := s.SyncThreads(context.Background(), fmt.Sprintf("machine-%04d", m), benchThreadsFor(*benchThreads, m, base)); err != nil {
			b.Fatal(err)
		}
	}
	return s, base
}

// BenchmarkSearch searches a history of -store.machines ×
// -store.threads threads, and reports the median and 99th percentile of
// each kind of query besides the mean.
func BenchmarkSearch(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, base := openBenchHistory(b, be.cfg(b))
			queries := []struct {
				name string
				q    store.ThreadQuery
			}{
				{"newest", store.ThreadQuery{}},
				{"machine", store.ThreadQuery{Machine: "machine-0001"}},
				{"word", store.ThreadQuery{Q: "payments"}},
				{"two-words+status", store.ThreadQuery{Q: "deploy database", Status: "done"}},
				{"word+since+page3", store.ThreadQuery{Q: "timeout", Since: base.Add(10 * time.Second), Limit: 20, Offset: 40}},
			}
			for _, qq := range queries {
				b.Run(qq.name, func(b *testing.B) {
					var lat []time.Duration
					for b.Loop() {
						start := time.Now()
						if _, err := s.SearchThreads(ctx, qq.q); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				})
			}
		})
	}
}

// BenchmarkDeepPage compares a page deep in a history of -store.machines
// × -store.threads threads (the scale run: -store.machines=100
// -store.threads=1000, 100,000 threads) with the first page, reached by
// offset and by keyset paging (After), for the newest threads and for a
// word. It reports each one's median and the ratio of the deep page's
// median to the first page's: keyset paging should stay near 1 however
// deep, where an offset's cost grows with the depth. No assertion: the
// numbers are for reading.
func BenchmarkDeepPage(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, _ := openBenchHistory(b, be.cfg(b))
			for _, kind := range []struct {
				name string
				q    store.ThreadQuery
			}{{"newest", store.ThreadQuery{}}, {"word", store.ThreadQuery{Q: "deploy"}}} {
				b.Run(kind.name, func(b *testing.B) {
					// The deep page starts 90% of the way down (the
					// count may be capped: the depth is computed).
					depth := *benchMachines * *benchThreads * 9 / 10
					if kind.q.Q != "" {
						depth = *benchMachines * *benchThreads / len(words) * 9 / 10
					}
					at := kind.q
					at.Offset, at.Limit = depth-1, 1
					before, err := s.SearchThreads(ctx, at)
					if err != nil || len(before.Threads) != 1 {
						b.Fatalf("the thread at %d: %v, %v", depth, before.Threads, err)
					}
					cursor := store.CursorOf(before.Threads[0])
					first, byOffset, byCursor := kind.q, kind.q, kind.q
					byOffset.Offset = depth
					byCursor.After = &cursor
					// Each kind of page is measured in a run of its own: an
					// offset page reads so much that it would evict what the
					// others find in the cache.
					p50 := map[string]float64{}
					for _, page := range []struct {
						name string
						q    store.ThreadQuery
					}{{"first", first}, {"offset", byOffset}, {"cursor", byCursor}} {
						b.Run(page.name, func(b *testing.B) {
							var lat []time.Duration
							for b.Loop() {
								start := time.Now()
								p, err := s.SearchThreads(ctx, page.q)
								if err != nil || len(p.Threads) == 0 {
									b.Fatalf("%d threads, %v", len(p.Threads), err)
								}
								lat = append(lat, time.Since(start))
							}
							slices.Sort(lat)
							p50[page.name] = float64(lat[len(lat)/2].Microseconds())
							b.ReportMetric(p50[page.name], "p50-µs")
						})
					}
					fmt.Printf("%s: %d threads, page at %d: offset/first %.1f, cursor/first %.1f\n", b.Name(), *benchMachines**benchThreads, depth,
						p50["offset"]/max(1, p50["first"]), p50["cursor"]/max(1, p50["first"]))
				})
			}
		})
	}
}

// BenchmarkStats summarises a history of -store.machines × -store.threads
// threads, all in the range, per machine and per workflow: the glance
// view's one query, which polls it.
func BenchmarkStats(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, base := openBenchHistory(b, be.cfg(b))
			for _, by := range []store.StatsBy{store.StatsByMachine, store.StatsByWorkflow} {
				b.Run(string(by), func(b *testing.B) {
					q := store.StatsQuery{By: by, Since: base.Add(-time.Hour), Until: base.Add(48 * time.Hour)}
					for b.Loop() {
						groups, err := s.ThreadStats(ctx, q)
						if err != nil || len(groups) == 0 {
							b.Fatalf("%d groups, %v", len(groups), err)
						}
					}
				})
			}
		})
	}
}
