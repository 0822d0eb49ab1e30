package api

import (
	"log/slog"
	"time"

	"github.com/uncaged/workflow/engine/host/wake"
)

// The readers of the root that stay open — the live route's streams and
// the event feed — wait until something they show may have changed (a
// wake.Hub on the engine host's change stream), then read what is new from
// the files exactly as a poll would. Where nothing can tell of changes,
// they look on a timer instead (server.pollEvery):
//
//   - a host older than its change stream, or an Engine that is not a
//     HostEngine: every LivePoll, as before there was a stream;
//   - no host (or none reached yet): every SlowPoll. No thread of this
//     engine moves then; what changes the root is the original TypeScript
//     engine's worker on a root shared with it, or a command such as
//     `thread rm`. A stream on a thread nobody runs ends at once;
//   - a thread the original's worker runs, even with a host: every
//     SlowPoll, as the host does not know of it.
//
// When the host's stream breaks (the host stopped or died) every reader is
// woken, and finds the threads it followed no longer running.

// pollEvery is how often a reader that waits for changes looks at the
// files by itself: never (0) while the engine host tells of every change,
// except for a thread the original engine's worker runs (elsewhere),
// which the host knows nothing of.
func (s *server) pollEvery(elsewhere bool) time.Duration {
	switch s.wakes.Mode() {
	case wake.Live:
		if elsewhere {
			return s.opts.SlowPoll
		}
		return 0
	case wake.Polled:
		return s.opts.LivePoll
	}
	return s.opts.SlowPoll // no host, or none reached yet (which wakes everyone when it is)
}

// newWakeHub is the hub of the API's readers: on engine's change stream
// when it has one (HostEngine), polled for another Engine, and with no
// host at all for none.
func newWakeHub(engine Engine, retry time.Duration, log *slog.Logger) *wake.Hub {
	switch src, ok := engine.(wake.Source); {
	case ok:
		return wake.NewHub(src, wake.Unknown, retry, log)
	case engine == nil:
		return wake.NewHub(nil, wake.NoHost, retry, log)
	default:
		return wake.NewHub(nil, wake.Polled, retry, log)
	}
}
