package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unicode/utf8"
)

const (
	// DefaultShellTimeout bounds a shell_exec call that names no timeout.
	DefaultShellTimeout = 30 * time.Second
	// MaxShellOutput is how many characters of output shell_exec returns.
	MaxShellOutput = 10000
	// truncatedMark follows output cut at MaxShellOutput.
	truncatedMark = "\n...(truncated)"
	// ShellTimedOut is shell_exec's result when the timeout kills the
	// command.
	ShellTimedOut = "Error: command timed out"
)

// errTimedOut marks a command killed by its own timeout.
var errTimedOut = errors.New("command timed out")

// ShellExec runs command with `sh -c` in the workspace and returns its
// combined stdout and stderr, cut at MaxShellOutput characters. The command
// runs in its own process group: when timeout passes or ctx is cancelled
// the whole group — the shell and anything it started — is killed. A
// non-zero exit is an error that carries the output. Cancelling ctx returns
// ctx's error; the timeout returns an error whose text is "command timed
// out".
func (w *Workspace) ShellExec(ctx context.Context, command string, timeout time.Duration) (string, error) {
	if command == "" {
		return "", errors.New("command is required")
	}
	if timeout <= 0 {
		timeout = DefaultShellTimeout
	}
	// The output goes to a file rather than a pipe: Wait then returns when
	// the shell exits even if a background job still holds the output open.
	out, err := os.CreateTemp("", "uncaged-shell-*.out")
	if err != nil {
		return "", fmt.Errorf("shell_exec: %w", err)
	}
	// A scratch file, read back below: once read, neither closing nor
	// removing it can lose anything the caller gets.
	defer func() {
		_ = out.Close()
		_ = os.Remove(out.Name())
	}()

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", command)
	cmd.Dir = w.dir
	cmd.Env = w.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if cctx.Err() != nil {
		return "", errTimedOut
	}
	text, rerr := readOutput(out)
	if rerr != nil {
		return "", fmt.Errorf("shell_exec: reading output: %w", rerr)
	}
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
		return text, nil
	case errors.As(runErr, &exitErr):
		if st, ok := exitErr.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return "", fmt.Errorf("command killed by signal %s\n%s", st.Signal(), text)
		}
		return "", fmt.Errorf("command exited with status %d\n%s", exitErr.ExitCode(), text)
	}
	return "", fmt.Errorf("shell_exec: %w", runErr)
}

// readOutput reads the command's output from the start, keeping at most
// MaxShellOutput characters.
func readOutput(f *os.File) (string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	// Enough bytes for MaxShellOutput characters of any width, plus one
	// to tell whether more followed.
	buf, err := io.ReadAll(io.LimitReader(f, MaxShellOutput*utf8.UTFMax+1))
	if err != nil {
		return "", err
	}
	return truncate(string(buf)), nil
}

// truncate cuts s after MaxShellOutput characters and marks the cut.
func truncate(s string) string {
	n := 0
	for i := range s {
		if n == MaxShellOutput {
			return s[:i] + truncatedMark
		}
		n++
	}
	return s
}
