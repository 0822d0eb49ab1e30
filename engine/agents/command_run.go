package agents

// Running a command agent's program: its process group, timeouts and
// cancellation, and its output streamed line by line into the debug log.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uncaged/workflow/engine/procgroup"
)

// commandOutput is what a finished program wrote.
type commandOutput struct {
	stdout    string
	truncated bool
}

func (o commandOutput) note() string {
	if !o.truncated {
		return ""
	}
	return fmt.Sprintf("\n[output truncated: only the first %d bytes were kept]", MaxCommandOutput)
}

// runCommand runs inv in its own process group, streaming its output into
// the thread's log line by line, and returns its stdout. Cancelling ctx
// (the thread was killed) or the timeout stops the whole group: SIGTERM,
// then SIGKILL after killGrace. The group also dies with the engine host
// (package procgroup).
func runCommand(ctx context.Context, inv invocation, logf func(tag, content string)) (commandOutput, error) {
	var logMu sync.Mutex
	log := func(tag, content string) {
		logMu.Lock()
		defer logMu.Unlock()
		logf(tag, content)
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if inv.timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, inv.timeout)
	}
	defer cancel()

	stdout := &lineLog{tag: "agent.out", log: log, keep: MaxCommandOutput, logCap: MaxCommandOutput}
	stderr := &lineLog{tag: "agent.err", log: log, tail: stderrTail, logCap: MaxCommandOutput}
	cmd := exec.CommandContext(runCtx, inv.argv[0], inv.argv[1:]...)
	cmd.Dir = inv.dir
	cmd.Env = inv.env
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	if inv.stdin != nil {
		cmd.Stdin = bytes.NewReader(inv.stdin)
	}
	group := procgroup.New(cmd, inv.owner)
	cmd.Cancel = func() error {
		return group.Signal(syscall.SIGTERM)
	}
	// After SIGTERM (or after the program exits with a grandchild still
	// holding its output), wait this long before SIGKILL and closing pipes.
	cmd.WaitDelay = killGrace

	if err := group.Start(); err != nil {
		if errors.Is(err, syscall.E2BIG) {
			err = fmt.Errorf("%w: %s", err, argvTooLong(inv.argv))
		}
		return commandOutput{}, &CommandError{Kind: ErrKindSpawnFailed, Agent: inv.label, Err: err}
	}
	pid := cmd.Process.Pid
	log("agent", fmt.Sprintf("%s started (pid %d)", inv.label, pid))
	started := time.Now()
	// Whatever the program left behind in its group (a daemonized helper,
	// a grandchild that ignored SIGTERM) goes with it: the role is over.
	waitErr := group.Wait(true)
	stdout.flush()
	stderr.flush()
	elapsed := time.Since(started).Round(time.Millisecond)

	if ctx.Err() != nil {
		log("agent", fmt.Sprintf("%s stopped: the thread was cancelled after %s", inv.label, elapsed))
		return commandOutput{}, fmt.Errorf("%s: %w", inv.label, ctx.Err())
	}
	if runCtx.Err() != nil {
		log("agent", fmt.Sprintf("%s timed out after %s", inv.label, elapsed))
		return commandOutput{}, &CommandError{Kind: ErrKindTimeout, Agent: inv.label, Timeout: inv.timeout, Stderr: stderr.tailText()}
	}
	var exitErr *exec.ExitError
	if errors.As(waitErr, &exitErr) {
		ce := &CommandError{Kind: ErrKindNonZeroExit, Agent: inv.label, ExitCode: exitErr.ExitCode(), Stderr: stderr.tailText()}
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ce.Signal = ws.Signal().String()
		}
		log("agent", fmt.Sprintf("%s failed after %s: %s", inv.label, elapsed, ce.Error()))
		return commandOutput{}, ce
	}
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return commandOutput{}, fmt.Errorf("%s: %w", inv.label, waitErr)
	}
	log("agent", fmt.Sprintf("%s exited 0 after %s", inv.label, elapsed))
	return commandOutput{stdout: stdout.kept.String(), truncated: stdout.truncated}, nil
}

// lineLog writes a stream to the thread's debug log a line at a time while
// the program runs, keeping the first keep bytes or the last tail bytes.
// os/exec calls Write from one goroutine per stream.
type lineLog struct {
	tag  string
	log  func(tag, content string)
	keep int // > 0: keep the first keep bytes in kept
	tail int // > 0: keep the last tail bytes in kept

	kept      bytes.Buffer
	truncated bool
	partial   []byte
	// logged counts bytes sent to the log; past logCap the rest is not
	// logged, so a runaway program cannot fill the disk.
	logCap int
	logged int
	muted  bool
}

func (l *lineLog) Write(p []byte) (int, error) {
	n := len(p)
	switch {
	case l.keep > 0:
		room := l.keep - l.kept.Len()
		if room < len(p) {
			l.truncated = true
			if room > 0 {
				l.kept.Write(p[:room])
			}
		} else {
			l.kept.Write(p)
		}
	case l.tail > 0:
		l.kept.Write(p)
		if over := l.kept.Len() - 2*l.tail; over > 0 {
			b := append([]byte(nil), l.kept.Bytes()[over:]...)
			l.kept.Reset()
			l.kept.Write(b)
		}
	}
	if l.muted {
		return n, nil
	}
	if l.logged += len(p); l.logCap > 0 && l.logged > l.logCap {
		l.muted = true
		l.partial = l.partial[:0]
		l.log(l.tag, fmt.Sprintf("[more than %d bytes of output; the rest is not logged]", l.logCap))
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			for len(l.partial) >= maxLogLine {
				l.log(l.tag, string(l.partial[:maxLogLine]))
				l.partial = append(l.partial[:0], l.partial[maxLogLine:]...)
			}
			break
		}
		l.partial = append(l.partial, p[:i]...)
		l.emit()
		p = p[i+1:]
	}
	return n, nil
}

// emit logs the pending line; an overlong one in maxLogLine pieces.
func (l *lineLog) emit() {
	line := l.partial
	for len(line) > maxLogLine {
		l.log(l.tag, string(line[:maxLogLine]))
		line = line[maxLogLine:]
	}
	l.log(l.tag, strings.TrimSuffix(string(line), "\r"))
	l.partial = l.partial[:0]
}

// flush logs an unterminated last line. Only after Wait returned.
func (l *lineLog) flush() {
	if len(l.partial) > 0 {
		l.emit()
	}
}

// tailText is the end of the kept stream, trimmed, for error messages.
func (l *lineLog) tailText() string {
	s := l.kept.String()
	if len(s) > l.tail {
		s = "…" + s[len(s)-l.tail:]
	}
	return strings.TrimSpace(s)
}
