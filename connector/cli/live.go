package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/host/wake"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// liveContentMaxLines is how many lines of a step's content live prints.
const liveContentMaxLines = 10

// How often live looks for new steps and log lines by itself. While the
// root's engine host tells of its threads' changes (wake.Live), live looks
// when told, and on a timer only for a thread the original engine's
// worker runs (the host knows nothing of it): every liveSlowPoll, as with
// no host at all (no thread of this engine moves then). A host older than
// its change stream is polled every livePolledEvery, as before there was
// one.
const (
	liveSlowPoll    = time.Second
	livePolledEvery = 100 * time.Millisecond
)

type liveOptions struct {
	latest bool
	debug  bool
	role   string
}

func (a *app) liveCmd(use string) *cobra.Command {
	var o liveOptions
	cmd := &cobra.Command{
		Use:   use + " <thread-id> | --latest [--debug] [--role <name>]",
		Short: "Attach to a thread and stream output live",
		Long: `Prints each step as it is written and returns when the thread ends, with a
last line that says how: "completed: …", "failed: …" or "killed: …".

Exit codes (so that "live <id> && next-step" waits for success, like
gh run watch --exit-status):
  0    the thread completed (return code 0)
  1    the thread failed (any other return code), its line names a head
       or start that cannot be trusted (the line is named), or live itself
       failed
  130  the thread was killed, or live was interrupted (Ctrl-C) before the
       thread ended (which does not stop the thread)`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return errors.New("unexpected extra argument")
			case o.latest && len(args) == 1:
				return errors.New("live --latest does not take <thread-id>")
			case !o.latest && len(args) == 0:
				return errors.New("live requires <thread-id> or --latest")
			}
			if cmd.Flags().Changed("role") && o.role == "" {
				return errors.New("missing value for --role")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.layout()
			if err != nil {
				return err
			}
			var rec threads.Record
			if o.latest {
				if rec, err = threads.Latest(l); errors.Is(err, threads.ErrNotFound) {
					return errors.New("live: no threads found")
				} else if err != nil {
					return withDoctorHint(err)
				}
			} else if rec, err = resolveThread(l, args[0]); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			code, err := a.follow(ctx, l, rec, o)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.latest, "latest", false, "follow the most recently updated thread")
	cmd.Flags().BoolVar(&o.debug, "debug", false, "also print the thread's debug log")
	cmd.Flags().StringVar(&o.role, "role", "", "print only this role's steps")
	return cmd
}

// Exit codes of live besides 0 and 1 (see liveCmd's help).
const (
	// liveExitKilled matches the return code of a killed thread, and
	// the shell's code for a command stopped by Ctrl-C (128 + SIGINT).
	liveExitKilled = threads.ReturnCodeKilled
)

// follow prints a thread's steps as they are written and returns when its
// __end__ appears, with the exit code that tells how it ended (see
// endLine), or when ctx ends (Ctrl-C: liveExitKilled, since the end was
// not seen).
func (a *app) follow(ctx context.Context, l storage.Layout, rec threads.Record, o liveOptions) (code int, err error) {
	store := cas.Open(l.CASDir())
	w := bufio.NewWriter(a.out())
	defer func() {
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
	}()
	style := a.liveStyle()
	order := liveOrder{role: o.role, debug: o.debug}
	// Subscribed before the first read: a change after it wakes the loop.
	slow, polled := cmp.Or(a.env.liveSlowPoll, liveSlowPoll), cmp.Or(a.env.livePolledEvery, livePolledEvery)
	hub := wake.NewHub(wake.Dialer{Layout: l}, wake.Unknown, slow, nil)
	waker := hub.Subscribe(rec.ThreadID, o.debug)
	defer waker.Close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var logOffset int64
	for {
		// The debug log is read before the chain, and the time it was
		// read is what liveOrder orders the poll's events against.
		cutoff := time.Now().UnixMilli()
		var lines []debugRecord
		if o.debug {
			lines, logOffset = readDebugRecords(l.InfoLog(rec.BundleHash, rec.ThreadID), logOffset)
		}
		// A head that cannot back a status has no trustworthy steps
		// either, and no __end__ may ever be seen from it: say why, once.
		if _, damage := threads.ReadStatus(store, rec, threads.NotExecuting); damage != nil {
			return 0, fmt.Errorf("live: thread %s cannot be followed: %w\n%s", rec.ThreadID, damage, doctorAdvice)
		}
		frames, err := threads.Walk(store, rec.Head)
		if err != nil {
			return 0, err
		}
		events, end := order.poll(cutoff, lines, frames)
		for _, e := range events {
			if e.step != nil {
				writeLiveStep(w, store, *e.step, style)
			} else {
				fmt.Fprintln(w, style.dim(formatDebugLine(e.debug.Timestamp, e.debug.Tag, e.debug.Content)))
			}
		}
		// The line that says how the thread ended is live's last.
		if end != nil {
			line, code := endLine(end.State.ReturnCode(), end.State.Summary())
			fmt.Fprintln(w, line)
			return code, nil
		}
		if err := w.Flush(); err != nil {
			return 0, err
		}
		var every <-chan time.Time
		switch hub.Mode() {
		case wake.Live:
			if host.Liveness(l, nil, rec) == threads.ExecutingElsewhere {
				timer.Reset(slow)
				every = timer.C
			}
		case wake.Polled:
			timer.Reset(polled)
			every = timer.C
		default:
			timer.Reset(slow)
			every = timer.C
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(a.env.Stderr, "stopped following thread %s; the thread itself was not stopped\n", rec.ThreadID)
			return liveExitKilled, nil
		case <-waker.C:
		case <-every:
		}
		timer.Stop()
		next, err := threads.Resolve(l, rec.ThreadID)
		if err != nil {
			return 0, err
		}
		rec = next
	}
}

// endLine is live's last line for a thread that ended with returnCode, and
// the exit code live ends with: 0 for a thread that completed, 130 for one
// that was killed, 1 for one that failed. A finished thread's line starts
// with its status, as thread list shows it.
func endLine(returnCode int, summary string) (string, int) {
	status, code := threads.StatusFailed, 1
	switch returnCode {
	case 0:
		status, code = threads.StatusCompleted, 0
	case threads.ReturnCodeKilled:
		status, code = threads.StatusKilled, liveExitKilled
	}
	return fmt.Sprintf("%s: returnCode=%d — %s", status, returnCode, summary), code
}

// liveStyle colours role headers and debug lines on a terminal unless
// NO_COLOR is set.
type liveStyle struct{ color bool }

func (a *app) liveStyle() liveStyle {
	return liveStyle{color: a.env.Getenv("NO_COLOR") == "" && isTerminal(a.env.Stdout)}
}

func (s liveStyle) role(r string) string {
	if s.color {
		return "\x1b[1m\x1b[36m" + r + "\x1b[0m"
	}
	return r
}

func (s liveStyle) dim(t string) string {
	if s.color {
		return "\x1b[2m\x1b[90m" + t + "\x1b[0m"
	}
	return t
}

func liveTime(ms int64) string { return time.UnixMilli(ms).Format("15:04:05") }

// writeLiveStep prints one step: a header, the first lines of its content,
// and its meta as compact JSON.
func writeLiveStep(w io.Writer, store *cas.Store, f threads.Frame, style liveStyle) {
	p := f.State.Payload
	fmt.Fprintf(w, "[%s] ▶ %s\n", liveTime(p.Timestamp), style.role(p.Role))
	lines := strings.Split(contentText(store, p.Content), "\n")
	shown := lines
	if len(lines) > liveContentMaxLines {
		shown = lines[:liveContentMaxLines]
	}
	for _, line := range shown {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if more := len(lines) - len(shown); more > 0 {
		plural := "s"
		if more == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "  … (%d more line%s)\n", more, plural)
	}
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		meta = []byte("{}")
	}
	fmt.Fprintf(w, "  meta: %s\n", meta)
}

// liveEvent is one thing live prints: a step, or a debug-log line.
type liveEvent struct {
	at    int64          // ms since the epoch
	step  *threads.Frame // nil for a debug-log line
	debug debugRecord
}

// liveOrder puts the steps and debug-log lines live prints in time order.
// Each poll reads the log, then the chain: a step the executor has
// written is in the chain by the time the log line it writes after it
// ("wrote role") can be read, so the lines and steps one poll finds can
// be printed sorted by time. One case is left: a step stamped after the
// log was read (at cutoff) but in the chain before the poll read it — the
// lines logged just before its stamp come with the next poll. Such a step
// is held back one poll (only one: a clock that jumped must not hold it
// for ever). Without --debug there is nothing to hold a step for.
type liveOrder struct {
	role    string          // --role: print only this role's steps
	debug   bool            // --debug: debug lines are followed too
	printed map[string]bool // frames printed or skipped
	held    map[string]bool // frames held back once
}

// poll returns what to print for one poll — the debug lines read up to
// cutoff (ms) and the chain read after them — in time order, and the
// thread's __end__ once it is due (printed after everything else).
func (o *liveOrder) poll(cutoff int64, lines []debugRecord, frames []threads.Frame) (events []liveEvent, end *threads.Frame) {
	if o.printed == nil {
		o.printed, o.held = map[string]bool{}, map[string]bool{}
	}
	for _, d := range lines {
		events = append(events, liveEvent{at: d.Timestamp, debug: d})
	}
	for _, f := range frames {
		p := f.State.Payload
		switch {
		case o.printed[f.Hash]:
			continue
		case p.Role == node.RoleFork, p.Role != node.RoleEnd && o.role != "" && p.Role != o.role:
			o.printed[f.Hash] = true
			continue
		case o.debug && p.Timestamp > cutoff && !o.held[f.Hash]:
			o.held[f.Hash] = true
			// What follows it in the chain is later still.
			return inTimeOrder(events), nil
		}
		o.printed[f.Hash] = true
		if p.Role == node.RoleEnd {
			end = &f
			break
		}
		events = append(events, liveEvent{at: p.Timestamp, step: &f})
	}
	return inTimeOrder(events), end
}

// inTimeOrder sorts events by time. At the same millisecond a step comes
// first: the executor logs what a step did once it is written. Events
// of one kind keep their order (the chain's, the log's).
func inTimeOrder(events []liveEvent) []liveEvent {
	slices.SortStableFunc(events, func(x, y liveEvent) int {
		if c := cmp.Compare(x.at, y.at); c != 0 {
			return c
		}
		return cmp.Compare(x.kind(), y.kind())
	})
	return events
}

func (e liveEvent) kind() int {
	if e.step != nil {
		return 0
	}
	return 1
}

// debugRecord is one line of a thread's debug log.
type debugRecord struct {
	Tag       string `json:"tag"`
	Content   string `json:"content"`
	Timestamp int64  `json:"timestamp"`
}

// readDebugRecords reads the debug-log lines written since offset and
// returns them with the new offset. A partly written last line waits for
// the next poll; a line that is not a record is skipped.
func readDebugRecords(path string, offset int64) ([]debugRecord, int64) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset
	}
	defer func() { _ = f.Close() }() // opened read-only
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, offset
	}
	end := strings.LastIndexByte(string(b), '\n')
	if end < 0 {
		return nil, offset
	}
	var out []debugRecord
	for _, line := range strings.Split(string(b[:end]), "\n") {
		var rec debugRecord
		if json.Unmarshal([]byte(line), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out, offset + int64(end) + 1
}

// formatDebugLine is one debug record on one line.
func formatDebugLine(ms int64, tag, content string) string {
	return fmt.Sprintf("[%s] [%s] %s", liveTime(ms), tag, strings.ReplaceAll(content, "\n", " "))
}
