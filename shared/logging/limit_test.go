package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// lockedBuffer is a bytes.Buffer safe for the handler's writers and the
// test's reads at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines decodes every JSON line written so far.
func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("not a JSON line: %q", s)
		}
		out = append(out, m)
	}
	return out
}

// Whatever mix of messages, levels and goroutines, each message writes
// at most Burst lines per interval, every event is counted, and the
// summary names exactly the events left out.
func TestLimitedWritesABoundedNumberOfLinesAndCountsEveryEvent(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		burst := 1 + rng.IntN(12)
		keys := 1 + rng.IntN(8)
		var buf lockedBuffer
		// Info and above are written; debug lines are only counted.
		l := NewLimited(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), LimitOptions{Burst: burst, Interval: time.Hour})
		logger := l.Logger().With("component", "test")
		want := map[string]uint64{}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := range 4 {
			n := rng.IntN(3000)
			seed := rng.Uint64()
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(g)))
				for range n {
					msg := fmt.Sprintf("refused %d", r.IntN(keys))
					level := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}[r.IntN(4)]
					logger.Log(t.Context(), level, msg, "address", fmt.Sprintf("192.0.2.%d", r.IntN(255)))
					mu.Lock()
					want[msg]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		written := map[string]int{}
		for _, line := range buf.lines(t) {
			written[line["msg"].(string)]++
			if line["component"] != "test" {
				t.Fatalf("a line lost the logger's attributes: %v", line)
			}
		}
		counts := map[string]LimitCount{}
		for _, c := range l.Counts() {
			counts[c.Key] = c
		}
		for msg, n := range want {
			if written[msg] > burst {
				t.Fatalf("round %d: %q written %d times, burst %d", round, msg, written[msg], burst)
			}
			c := counts[msg]
			if c.Events != n || c.Suppressed != n-min(n, uint64(burst)) {
				t.Fatalf("round %d: %q: counted %+v, want %d events, %d suppressed", round, msg, c, n, n-min(n, uint64(burst)))
			}
		}
		before := len(buf.lines(t))
		l.Flush()
		suppressed := map[string]float64{}
		for _, line := range buf.lines(t)[before:] {
			if line["msg"] != SuppressedMessage {
				t.Fatalf("Flush wrote %v", line)
			}
			suppressed[line["message"].(string)] = line["suppressed"].(float64)
		}
		for msg, c := range counts {
			if c.Suppressed > 0 && suppressed[msg] != float64(c.Suppressed) {
				t.Fatalf("round %d: %q: summary says %v left out, counted %d", round, msg, suppressed[msg], c.Suppressed)
			}
		}
		l.Flush()
		if len(buf.lines(t)) != before+len(suppressed) {
			t.Fatal("a second Flush wrote again what the first had")
		}
	}
}

// Once an interval is over, the summary is written on its own, and the
// next interval gets its burst again.
func TestLimitedSummarizesAtTheEndOfTheInterval(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	l := NewLimited(slog.NewJSONHandler(&buf, nil), LimitOptions{Burst: 2, Interval: 50 * time.Millisecond})
	log := l.Logger()
	for range 100 {
		log.Warn("unsigned message ignored")
	}
	testkit.WaitUntil(t, "the summary line", func() bool {
		for _, line := range buf.lines(t) {
			if line["msg"] == SuppressedMessage && line["suppressed"] == float64(98) && line["level"] == "WARN" {
				return true
			}
		}
		return false
	})
	log.Warn("unsigned message ignored")
	lines := buf.lines(t)
	if last := lines[len(lines)-1]; last["msg"] != "unsigned message ignored" {
		t.Fatalf("the next interval's first line was not written: %v", last)
	}
}

// Keys past MaxKeys share one, so keys made from input cannot grow the
// table.
func TestLimitedBoundsItsKeys(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	l := NewLimited(slog.NewJSONHandler(&buf, nil), LimitOptions{Burst: 1, Interval: time.Hour, MaxKeys: 5})
	for i := range 1000 {
		l.Logger().Info(fmt.Sprintf("message %d", i))
	}
	counts := l.Counts()
	if len(counts) != 6 {
		t.Fatalf("%d keys, want 5 and %q", len(counts), OtherMessages)
	}
	var total uint64
	for _, c := range counts {
		total += c.Events
	}
	if total != 1000 || len(buf.lines(t)) != 6 {
		t.Fatalf("%d events counted, %d lines written", total, len(buf.lines(t)))
	}
}

func TestStdKeyDropsWhatVaries(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"http: TLS handshake error from 192.0.2.1:4242: EOF":                  "http: TLS handshake error from",
		"http: TLS handshake error from [2001:db8::1]:4242: EOF":              "http: TLS handshake error from",
		"http2: server: error reading preface from client 127.0.0.1:5: bogus": "http2: server: error reading preface from client",
		"http: Accept error: accept4: too many open files; retrying in 5ms":   "http: Accept error: accept4: too many open files; retrying in",
		"no digits at all":            "no digits at all",
		"(starts with a parenthesis)": "",
	} {
		if got := StdKey(msg); got != want {
			t.Errorf("StdKey(%q) = %q, want %q", msg, got, want)
		}
	}
	var buf lockedBuffer
	l := NewLimited(slog.NewJSONHandler(&buf, nil), LimitOptions{Burst: 3, Interval: time.Hour})
	std := l.StdLogger(slog.LevelWarn)
	for i := range 50 {
		std.Printf("http: TLS handshake error from 192.0.2.%d:%d: EOF", i, 1000+i)
	}
	if n := len(buf.lines(t)); n != 3 {
		t.Fatalf("%d lines written for 50 handshake errors, want 3", n)
	}
}
