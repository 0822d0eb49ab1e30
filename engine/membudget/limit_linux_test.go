package membudget

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSmallestLimitWalksUpToTheMount(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	write := func(dir, v string) {
		if err := os.MkdirAll(filepath.Join(mount, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mount, dir, "memory.max"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".", "max")
	write("a", "2147483648")
	write("a/b", "max")
	write("a/b/c", "9223372036854771712") // v1's "no limit"
	if got := smallestLimit(mount, "/a/b/c", "memory.max"); got != 2<<30 {
		t.Fatalf("smallestLimit = %d, want the parent's 2GiB", got)
	}
	if got := smallestLimit(mount, "/", "memory.max"); got != 0 {
		t.Fatalf("no limit at the root: %d", got)
	}
}
