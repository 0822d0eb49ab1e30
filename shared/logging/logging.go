// Package logging builds the structured logger both binaries use: JSON
// lines for log collectors, readable key=value text when a person watches
// the terminal.
package logging

import (
	"io"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"
)

// New returns a logger writing to w at level: text when w is a terminal,
// JSON otherwise.
func New(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if isTerminal(w) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
