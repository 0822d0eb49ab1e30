package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// liveContentMaxLines is how many lines of a step's content live prints.
const liveContentMaxLines = 10

// livePoll is how often live looks for new steps and log lines.
const livePoll = 100 * time.Millisecond

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
	printed := map[string]bool{}
	var logOffset int64
	for {
		if o.debug {
			logOffset = printDebugLines(w, l.InfoLog(rec.BundleHash, rec.ThreadID), logOffset, style)
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
		for _, f := range frames {
			if printed[f.Hash] {
				continue
			}
			printed[f.Hash] = true
			p := f.State.Payload
			switch {
			case p.Role == node.RoleEnd:
				line, code := endLine(f.State.ReturnCode(), f.State.Summary())
				fmt.Fprintln(w, line)
				return code, nil
			case p.Role == node.RoleFork, o.role != "" && p.Role != o.role:
				continue
			}
			writeLiveStep(w, store, f, style)
		}
		if err := w.Flush(); err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(a.env.Stderr, "stopped following thread %s; the thread itself was not stopped\n", rec.ThreadID)
			return liveExitKilled, nil
		case <-time.After(livePoll):
		}
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
	f, ok := a.env.Stdout.(*os.File)
	if !ok || a.env.Getenv("NO_COLOR") != "" {
		return liveStyle{}
	}
	st, err := f.Stat()
	return liveStyle{color: err == nil && st.Mode()&os.ModeCharDevice != 0}
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

// printDebugLines prints the debug-log lines written since offset and
// returns the new offset. A partly written last line waits for the next
// poll.
func printDebugLines(w io.Writer, path string, offset int64, style liveStyle) int64 {
	f, err := os.Open(path)
	if err != nil {
		return offset
	}
	defer func() { _ = f.Close() }() // opened read-only
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return offset
	}
	end := strings.LastIndexByte(string(b), '\n')
	if end < 0 {
		return offset
	}
	for _, line := range strings.Split(string(b[:end]), "\n") {
		var rec struct {
			Tag       string `json:"tag"`
			Content   string `json:"content"`
			Timestamp int64  `json:"timestamp"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		fmt.Fprintln(w, style.dim(formatDebugLine(rec.Timestamp, rec.Tag, rec.Content)))
	}
	return offset + int64(end) + 1
}

// formatDebugLine is one debug record on one line.
func formatDebugLine(ms int64, tag, content string) string {
	return fmt.Sprintf("[%s] [%s] %s", liveTime(ms), tag, strings.ReplaceAll(content, "\n", " "))
}
