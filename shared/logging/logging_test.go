package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/uncaged/workflow/shared/envflag"
)

func TestJSONUnlessTerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	New(&buf, slog.LevelInfo).Info("hello", "request_id", "abc")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "hello" || line["request_id"] != "abc" {
		t.Fatalf("want one JSON line, got %q (%v)", buf.String(), err)
	}

	buf.Reset()
	New(&buf, slog.LevelWarn).Info("dropped")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %q", buf.String())
	}

	// A regular file is not a terminal either.
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read back below; a temporary file
	New(f, slog.LevelInfo).Info("to a file")
	data, _ := os.ReadFile(f.Name())
	if !strings.HasPrefix(string(data), "{") {
		t.Fatalf("a file got %q, want JSON", data)
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	parse := func(args []string, env map[string]string) (Options, error) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		var f Flags
		f.Register(fs, "X_")
		if err := fs.Parse(args); err != nil {
			return Options{}, err
		}
		if err := envflag.Apply(fs, func(k string) string { return env[k] }); err != nil {
			return Options{}, err
		}
		return f.Options(), nil
	}

	// --log-format text and --log-level debug reach a real line, even to
	// a buffer (which alone would get JSON).
	o, err := parse([]string{"--log-level", "debug", "--log-format", "text"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	o.New(&buf).Debug("hello", "k", "v")
	if got := buf.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "msg=hello k=v") {
		t.Fatalf("got %q, want a debug text line", got)
	}

	// The variables set them when the flags are not given; the flag wins.
	o, err = parse([]string{"--log-format", "json"}, map[string]string{"X_LOG_LEVEL": "error", "X_LOG_FORMAT": "text"})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	l := o.New(&buf)
	l.Warn("dropped")
	l.Error("kept")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "kept" {
		t.Fatalf("got %q (%v), want only the error as JSON", buf.String(), err)
	}

	// Defaults: info, JSON off a terminal.
	o, err = parse(nil, nil)
	if err != nil || o != (Options{Level: slog.LevelInfo}) {
		t.Fatalf("defaults = %+v (%v)", o, err)
	}

	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		if _, err := parse(args, nil); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if _, err := parse(nil, map[string]string{"X_LOG_LEVEL": "loud"}); err == nil || !strings.Contains(err.Error(), "X_LOG_LEVEL") {
		t.Errorf("a bad variable: %v", err)
	}
}
