package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
)

func TestJSONUnlessTerminal(t *testing.T) {
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
	defer f.Close()
	New(f, slog.LevelInfo).Info("to a file")
	data, _ := os.ReadFile(f.Name())
	if !strings.HasPrefix(string(data), "{") {
		t.Fatalf("a file got %q, want JSON", data)
	}
}
