package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// Status is everything `uncaged-workflow status` reports, as --json prints
// it. Counts that could not be read are -1 with the reason in Problems, so
// one unreadable file does not hide the rest of the picture.
type Status struct {
	Root       string         `json:"root"`
	RootExists bool           `json:"rootExists"`
	Engine     EngineStatus   `json:"engine"`
	Workflows  int            `json:"workflows"`
	Threads    ThreadCounts   `json:"threads"`
	Connect    *connectStatus `json:"connect"` // nil: connect never ran on this root
	Problems   []string       `json:"problems,omitempty"`
}

// EngineStatus is the engine host part of Status.
type EngineStatus struct {
	Running    bool  `json:"running"`
	PID        int   `json:"pid,omitempty"`
	StartedAt  int64 `json:"startedAt,omitempty"`
	MaxThreads int   `json:"maxThreads,omitempty"`
	// ThreadsRunning and ThreadsPaused are the threads the host holds.
	ThreadsRunning int `json:"threadsRunning"`
	ThreadsPaused  int `json:"threadsPaused"`
}

// ThreadCounts counts the threads in the indexes: active (threads.json) and
// finished (history).
type ThreadCounts struct {
	Active   int `json:"active"`
	Finished int `json:"finished"`
}

func (a *app) statusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this machine at a glance: storage, engine host, threads, gateway link",
		Args:  exactArgs(0, 0, "", "status takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.lookLayout()
			if err != nil {
				return err
			}
			s := collectStatus(l)
			if asJSON {
				return writeJSON(a.out(), s)
			}
			printStatus(a.out(), s, time.Now())
			return nil
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// collectStatus reads what it can; it never changes the root (a status
// check must not create a store that is not there).
func collectStatus(l storage.Layout) Status {
	s := Status{Root: l.Root, Workflows: -1, Threads: ThreadCounts{Active: -1, Finished: -1}}
	problem := func(what string, err error) { s.Problems = append(s.Problems, what+": "+err.Error()) }
	if st, err := os.Stat(l.Root); err == nil && st.IsDir() {
		s.RootExists = true
	} else if err == nil {
		problem("storage root", errors.New("not a directory"))
	}
	if !s.RootExists {
		s.Workflows, s.Threads = 0, ThreadCounts{}
		return s
	}

	if c, err := host.Dial(l); errors.Is(err, host.ErrRefused) {
		s.Engine.Running = host.Running(l)
		problem("engine host", err)
	} else if err == nil {
		st, serr := c.Status()
		list, lerr := c.List()
		c.Close()
		switch {
		case serr != nil:
			problem("engine host", serr)
		case lerr != nil:
			problem("engine host", lerr)
		default:
			s.Engine = EngineStatus{Running: true, PID: st.PID, StartedAt: st.StartedAt, MaxThreads: st.MaxThreads}
			for _, r := range list {
				if r.Status == threads.StatusPaused {
					s.Engine.ThreadsPaused++
				} else {
					s.Engine.ThreadsRunning++
				}
			}
		}
	} else if host.Running(l) {
		// Locked but not answering: starting up, or stuck.
		s.Engine.Running = true
		problem("engine host", errors.New("holds the lock but does not answer on "+host.SocketPath(l)))
	}

	if reg, err := registry.Load(l.RegistryFile()); err != nil {
		problem("registry", err)
	} else {
		s.Workflows = len(reg.Names())
	}

	if counts, err := countThreads(l); err != nil {
		problem("threads", err)
	} else {
		s.Threads = counts
	}

	if cs, ok, err := readConnectStatus(l); err != nil {
		problem("connect", err)
	} else if ok {
		s.Connect = &cs
	}
	return s
}

// countThreads counts index entries without resolving them: status must
// stay quick on a store with many thousands of threads.
func countThreads(l storage.Layout) (ThreadCounts, error) {
	var c ThreadCounts
	hashes, err := threads.BundleHashes(l)
	if err != nil {
		return c, err
	}
	for _, h := range hashes {
		dir := l.BundleDir(h)
		idx, err := threads.ReadIndex(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return c, err
		}
		c.Active += len(idx)
		if err := threads.EachHistory(dir, func(threads.HistoryEntry) error { c.Finished++; return nil }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return c, err
		}
	}
	return c, nil
}

// printStatus writes the one-screen summary.
func printStatus(w io.Writer, s Status, now time.Time) {
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-13s %s\n", label, fmt.Sprintf(format, args...))
	}
	if s.RootExists {
		row("storage root", "%s", s.Root)
	} else {
		row("storage root", "%s (not created yet)", s.Root)
	}

	switch e := s.Engine; {
	case e.Running && e.PID != 0:
		row("engine host", "running, pid %d, up since %s", e.PID, when(e.StartedAt, now))
		row("", "%d threads running, %d paused (runs up to %d at once)", e.ThreadsRunning, e.ThreadsPaused, e.MaxThreads)
	case e.Running:
		row("engine host", "locked but not answering")
	default:
		row("engine host", "not running (one starts when a thread needs it; `engine serve` keeps one up)")
	}

	if s.Workflows >= 0 {
		row("workflows", "%d registered", s.Workflows)
	} else {
		row("workflows", "unknown (see below)")
	}
	if s.Threads.Active >= 0 {
		row("threads", "%d active, %d finished", s.Threads.Active, s.Threads.Finished)
	} else {
		row("threads", "unknown (see below)")
	}

	switch c := s.Connect; {
	case c == nil:
		row("connect", "never run on this storage root")
	case c.State == link.StateFailed:
		// Whatever the lock says: a connect records failed only as it
		// exits, and the next one records connecting as soon as it holds
		// the lock. (The lock may outlive the exit for a moment, held by
		// a child forked just then, which drops it when it execs.)
		row("connect", "gave up (exit %d): %q to %s, at %s", c.ExitCode, c.Name, c.Gateway, when(c.Since, now))
		row("", "why: %s", c.Detail)
	case !c.Running:
		row("connect", "not running (last: %q to %s, %s since %s)", c.Name, c.Gateway, c.State, when(c.Since, now))
	default:
		line := fmt.Sprintf("%s: %q to %s since %s, pid %d", c.State, c.Name, c.Gateway, when(c.Since, now), c.PID)
		if c.Detail != "" {
			line += " — " + c.Detail
		}
		row("connect", "%s", line)
	}

	for _, p := range s.Problems {
		row("problem", "%s", p)
	}
}

// when is an absolute time a person can also read at a glance.
func when(ms int64, now time.Time) string {
	t := time.UnixMilli(ms)
	ago := now.Sub(t).Round(time.Second)
	if ago < 0 {
		ago = 0
	}
	return fmt.Sprintf("%s (%s ago)", t.Local().Format(time.RFC3339), ago)
}
