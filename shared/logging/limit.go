package logging

import (
	"context"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// A log line that a party without a credential can make a process write
// — a refused token, an unsigned cluster message, a connection over a
// limit — is a way to fill its disk: a million such attempts must not
// cost a million lines. Limited is the one mechanism for those lines. It
// keys them by message and, per key and per interval, passes the first
// few on; the rest are counted, and once the interval is over one line
// says how many were left out. Every event is counted (Counts), logged or
// not, so a metric can show the whole volume the log no longer does.

// Defaults of LimitOptions.
const (
	// DefaultLimitBurst is how many lines of one message are written per
	// interval: enough to see who and what, not enough to flood.
	DefaultLimitBurst = 10
	// DefaultLimitInterval is the interval.
	DefaultLimitInterval = time.Minute
	// DefaultLimitKeys bounds the messages tracked: the messages are the
	// program's own words, but a key made from a client's input must not
	// grow the table without bound.
	DefaultLimitKeys = 256
)

// OtherMessages is the key of the messages past LimitOptions.MaxKeys.
const OtherMessages = "(other messages)"

// SuppressedMessage is the message of the line that reports what was
// left out.
const SuppressedMessage = "log lines suppressed"

// LimitOptions configure a Limited handler; zero values take the defaults.
type LimitOptions struct {
	// Burst is how many lines of one key are written per Interval.
	Burst int
	// Interval is the window the burst is counted in.
	Interval time.Duration
	// MaxKeys bounds the keys tracked; more share OtherMessages.
	MaxKeys int
}

// LimitCount is what a Limited handler saw of one key since it started.
type LimitCount struct {
	// Key is the message (or the key given to HandleKeyed).
	Key string
	// Events counts every line asked for, written or not.
	Events uint64
	// Suppressed counts those that were not written.
	Suppressed uint64
}

// Limited is a slog.Handler that writes at most Burst lines per key per
// Interval to the handler it wraps, and reports the rest (see above).
// The key is the record's message. Handlers derived with WithAttrs and
// WithGroup share the counts.
type Limited struct {
	inner slog.Handler
	s     *limitState
}

// limitState is what every handler derived from one Limited shares.
type limitState struct {
	root     slog.Handler // the summaries are written here
	burst    int
	interval time.Duration
	maxKeys  int

	mu   sync.Mutex
	keys map[string]*limitKey
}

// limitKey is one key's window and totals.
type limitKey struct {
	events, suppressed uint64
	windowStart        time.Time
	logged             int
	// pending counts the lines left out since the last summary; flush is
	// the timer that writes it, set while pending is not 0.
	pending uint64
	level   slog.Level
	flush   *time.Timer
}

// NewLimited wraps h.
func NewLimited(h slog.Handler, o LimitOptions) *Limited {
	if o.Burst <= 0 {
		o.Burst = DefaultLimitBurst
	}
	if o.Interval <= 0 {
		o.Interval = DefaultLimitInterval
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultLimitKeys
	}
	return &Limited{inner: h, s: &limitState{root: h, burst: o.Burst, interval: o.Interval, maxKeys: o.MaxKeys, keys: map[string]*limitKey{}}}
}

// Logger is a logger writing through l.
func (l *Limited) Logger() *slog.Logger { return slog.New(l) }

// Enabled implements slog.Handler. It is always true: a line below the
// level is not written but still counted.
func (l *Limited) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler, keyed by the record's message.
func (l *Limited) Handle(ctx context.Context, r slog.Record) error {
	return l.HandleKeyed(ctx, r.Message, r)
}

// HandleKeyed is Handle with the key given: for a line whose message is
// the same for events that differ in kind (a request log's "request",
// keyed by its status).
func (l *Limited) HandleKeyed(ctx context.Context, key string, r slog.Record) error {
	if l.s.admit(key, r.Level) && l.inner.Enabled(ctx, r.Level) {
		return l.inner.Handle(ctx, r)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (l *Limited) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Limited{inner: l.inner.WithAttrs(attrs), s: l.s}
}

// WithGroup implements slog.Handler.
func (l *Limited) WithGroup(name string) slog.Handler {
	return &Limited{inner: l.inner.WithGroup(name), s: l.s}
}

// admit counts an event of key and says whether its line is written.
func (s *limitState) admit(key string, level slog.Level) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil {
		if len(s.keys) >= s.maxKeys {
			key = OtherMessages
			k = s.keys[key]
		}
		if k == nil {
			k = &limitKey{}
			s.keys[key] = k
		}
	}
	k.events++
	// Read under the lock, so that windows only move forward.
	at := time.Now()
	if at.Sub(k.windowStart) >= s.interval {
		k.windowStart, k.logged = at, 0
	}
	if k.logged < s.burst {
		k.logged++
		return true
	}
	k.suppressed++
	if k.pending == 0 || level > k.level {
		k.level = level
	}
	k.pending++
	if k.flush == nil {
		wait := k.windowStart.Add(s.interval).Sub(at)
		k.flush = time.AfterFunc(wait, func() { s.summarize(key) })
	}
	return false
}

// summarize writes the line saying how many of key's lines were left
// out since the last one.
func (s *limitState) summarize(key string) {
	s.mu.Lock()
	k := s.keys[key]
	if k == nil || k.pending == 0 {
		if k != nil {
			k.flush = nil
		}
		s.mu.Unlock()
		return
	}
	n, level, since := k.pending, k.level, k.windowStart
	k.pending = 0
	if k.flush != nil {
		k.flush.Stop()
		k.flush = nil
	}
	s.mu.Unlock()
	ctx := context.Background()
	if !s.root.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, SuppressedMessage, 0)
	r.AddAttrs(slog.String("message", key), slog.Uint64("suppressed", n), slog.Time("since", since))
	// A log that cannot be written has nowhere to say so.
	_ = s.root.Handle(ctx, r)
}

// Flush writes now the summary of every key with lines left out, rather
// than at the end of its interval: before a process exits, so that the
// count is in its log.
func (l *Limited) Flush() {
	l.s.mu.Lock()
	keys := make([]string, 0, len(l.s.keys))
	for key, k := range l.s.keys {
		if k.pending > 0 {
			keys = append(keys, key)
		}
	}
	l.s.mu.Unlock()
	slices.Sort(keys)
	for _, key := range keys {
		l.s.summarize(key)
	}
}

// Counts is every key's totals since the start, by key.
func (l *Limited) Counts() []LimitCount {
	l.s.mu.Lock()
	out := make([]LimitCount, 0, len(l.s.keys))
	for key, k := range l.s.keys {
		out = append(out, LimitCount{Key: key, Events: k.events, Suppressed: k.suppressed})
	}
	l.s.mu.Unlock()
	slices.SortFunc(out, func(a, b LimitCount) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// StdLogger is a log.Logger writing through l at level, for libraries
// that log through the standard package (net/http's Server.ErrorLog). Its
// lines carry the client's address and the like, so each is keyed by its
// text up to the first digit, bracket or parenthesis: "http: TLS
// handshake error from 192.0.2.1:4242: EOF" is keyed "http: TLS handshake
// error from".
func (l *Limited) StdLogger(level slog.Level) *log.Logger {
	return log.New(stdWriter{l: l, level: level}, "", 0)
}

// stdWriter turns each line of a log.Logger into a record.
type stdWriter struct {
	l     *Limited
	level slog.Level
}

func (w stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	r := slog.NewRecord(time.Now(), w.level, msg, 0)
	return len(p), w.l.HandleKeyed(context.Background(), StdKey(msg), r)
}

// StdKey is the key StdLogger gives a line.
func StdKey(msg string) string {
	words := strings.Fields(msg)
	for i, w := range words {
		if strings.IndexAny(w[:1], "0123456789[(") == 0 {
			words = words[:i]
			break
		}
	}
	return strings.TrimRight(strings.Join(words, " "), ":")
}
