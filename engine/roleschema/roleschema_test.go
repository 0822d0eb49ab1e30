package roleschema

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCompile(t *testing.T) {
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
