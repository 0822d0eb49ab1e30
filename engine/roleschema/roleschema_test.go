package roleschema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCompile(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(`{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer"}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"n": 1}); err != nil {
		t.Errorf("valid meta refused: %v", err)
	}
	if err := s.Validate(map[string]any{"n": "one"}); err == nil {
		t.Error("invalid meta accepted")
	}
}

func TestCompileRefusesBadSchemasAndOutsideRefs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		``, `{`, `{"type":"object"} x`, `{"type":7}`, `{"minimum":"zero"}`,
		`{"$ref":"file://` + file + `"}`,
		`{"$ref":"https://example.com/schema.json"}`,
	} {
		if _, err := Compile([]byte(bad)); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	verr := s.Validate(map[string]any{"b": "x"})
	if verr == nil {
		t.Fatal("invalid meta accepted")
	}
	got := ErrorText(verr)
	if strings.Contains(got, "\n") || strings.Contains(got, "jsonschema validation failed") || !strings.Contains(got, "; ") {
		t.Errorf("ErrorText = %q: want the library's lines joined on one line, without the header", got)
	}

	long := errors.New("jsonschema validation failed with 'x'\n- " + strings.Repeat("é", maxErrorText))
	got = ErrorText(long)
	if !strings.HasSuffix(got, "…") || len(got) > maxErrorText+len("…") || !utf8.ValidString(got) {
		t.Errorf("long error: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
