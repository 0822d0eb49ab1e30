// Package logging builds the structured logger both binaries use: JSON
// lines for log collectors, readable key=value text when a person watches
// the terminal.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/shared/envflag"
)

// Format is how log lines are written.
type Format string

const (
	// FormatAuto writes text to a terminal and JSON anywhere else.
	FormatAuto Format = ""
	// FormatJSON writes one JSON object per line.
	FormatJSON Format = "json"
	// FormatText writes slog's key=value text.
	FormatText Format = "text"
)

// Options are a logger's level and format.
type Options struct {
	Level  slog.Level
	Format Format
}

// New returns a logger writing to w at level: text when w is a terminal,
// JSON otherwise.
func New(w io.Writer, level slog.Level) *slog.Logger {
	return Options{Level: level}.New(w)
}

// New returns a logger writing to w with o's level and format.
func (o Options) New(w io.Writer) *slog.Logger {
	return slog.New(o.handler(w, isTerminal(w)))
}

// handler writes to w in o's format, text for FormatAuto when terminal.
func (o Options) handler(w io.Writer, terminal bool) slog.Handler {
	opts := &slog.HandlerOptions{Level: o.Level}
	if o.Format == FormatText || (o.Format == FormatAuto && terminal) {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// Flags holds the values of --log-level and --log-format, so that each
// binary decides its logging in one place: the flags on its root command.
// The flags check their values when set, so a bad value from a variable is
// reported with the variable's name.
type Flags struct {
	level  levelValue
	format formatValue
}

// Register adds --log-level and --log-format to fs, bound to the variables
// <envPrefix>LOG_LEVEL and <envPrefix>LOG_FORMAT.
func (f *Flags) Register(fs *pflag.FlagSet, envPrefix string) {
	f.level = levelValue(slog.LevelInfo)
	fs.Var(&f.level, "log-level", "least severe log level written: debug, info, warn or error")
	fs.Var(&f.format, "log-format", "log line format: json or text (default: text on a terminal, JSON otherwise)")
	envflag.Bind(fs, "log-level", envPrefix+"LOG_LEVEL")
	envflag.Bind(fs, "log-format", envPrefix+"LOG_FORMAT")
}

// Options are the flags' values.
func (f *Flags) Options() Options {
	return Options{Level: slog.Level(f.level), Format: Format(f.format)}
}

// levelValue is a pflag.Value for a slog level by name.
type levelValue slog.Level

func (l *levelValue) String() string { return strings.ToLower(slog.Level(*l).String()) }
func (l *levelValue) Type() string   { return "level" }
func (l *levelValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug":
		*l = levelValue(slog.LevelDebug)
	case "info":
		*l = levelValue(slog.LevelInfo)
	case "warn", "warning":
		*l = levelValue(slog.LevelWarn)
	case "error":
		*l = levelValue(slog.LevelError)
	default:
		return fmt.Errorf("%q: want debug, info, warn or error", s)
	}
	return nil
}

// formatValue is a pflag.Value for a Format.
type formatValue Format

func (f *formatValue) String() string { return string(*f) }
func (f *formatValue) Type() string   { return "format" }
func (f *formatValue) Set(s string) error {
	switch v := Format(strings.ToLower(s)); v {
	case FormatJSON, FormatText:
		*f = formatValue(v)
	default:
		return fmt.Errorf("%q: want json or text", s)
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
