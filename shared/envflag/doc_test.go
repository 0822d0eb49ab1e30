package envflag

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestMarkdownAndCheckSection(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "bin"}
	sub := &cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}}
	sub.Flags().String("addr", ":1", "where | to listen")
	sub.Flags().String("name", "host-1", "a name")
	Bind(sub.Flags(), "addr", "BIN_ADDR", "OLD_ADDR")
	DocDefault(sub.Flags(), "name", "the host name")
	root.AddCommand(sub)
	md := Markdown(root)
	for _, want := range []string{"### `bin sub`", "| `--addr` | `BIN_ADDR`, `OLD_ADDR` | `:1` | where \\| to listen |", "| `--name` |  | the host name | a name |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte("intro\n<!-- begin bin -->\nold\n<!-- end bin -->\nrest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckSection(path, "bin", md, "regen-cmd", false); err == nil || !strings.Contains(err.Error(), "regen-cmd") {
		t.Fatalf("a stale section: %v", err)
	}
	if err := CheckSection(path, "bin", md, "regen-cmd", true); err != nil {
		t.Fatal(err)
	}
	if err := CheckSection(path, "bin", md, "regen-cmd", false); err != nil {
		t.Fatalf("after update: %v", err)
	}
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), "intro\n") || !strings.HasSuffix(string(b), "<!-- end bin -->\nrest\n") {
		t.Fatalf("update touched the rest: %q", b)
	}
}
