package loadgen

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Stats summarise a set of samples: latency percentiles of the successful
// requests (an error's latency says little: a refused connection is fast,
// a timeout is the timeout), and the errors by kind.
type Stats struct {
	Requests, Errors   int
	ByKind             map[string]int
	P50, P90, P99, Max time.Duration
	// Rate is the successful requests per second over the span given.
	Rate float64
}

// Summarize computes the stats of the samples keep selects (nil: all),
// over span for the rate.
func Summarize(samples []Sample, keep func(Sample) bool, span time.Duration) Stats {
	st := Stats{ByKind: map[string]int{}}
	var lat []time.Duration
	for _, s := range samples {
		if keep != nil && !keep(s) {
			continue
		}
		st.Requests++
		if s.Kind != "" {
			st.Errors++
			st.ByKind[s.Kind]++
			continue
		}
		lat = append(lat, s.Latency())
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if n := len(lat); n > 0 {
		pct := func(p float64) time.Duration { return lat[min(n-1, int(p*float64(n)))] }
		st.P50, st.P90, st.P99, st.Max = pct(0.50), pct(0.90), pct(0.99), lat[n-1]
	}
	if span > 0 {
		st.Rate = float64(len(lat)) / span.Seconds()
	}
	return st
}

// Kinds formats the errors by kind, most frequent first ("none" when
// there are none).
func (s Stats) Kinds() string {
	if len(s.ByKind) == 0 {
		return "none"
	}
	kinds := make([]string, 0, len(s.ByKind))
	for k := range s.ByKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if s.ByKind[kinds[i]] != s.ByKind[kinds[j]] {
			return s.ByKind[kinds[i]] > s.ByKind[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, s.ByKind[k])
	}
	return strings.Join(parts, ", ")
}

// Window is a span of time, for telling errors during a chaos event from
// the rest.
type Window struct{ From, To time.Time }

// Overlaps says whether a request was in flight at some time in the
// window.
func (w Window) Overlaps(s Sample) bool { return !s.End.Before(w.From) && !s.Start.After(w.To) }

// Percentile is the p-th (0..1) of sorted durations; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
