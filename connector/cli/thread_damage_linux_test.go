//go:build linux

package cli

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/threads"
)

// A FIFO where the head's blob belongs must be damage, and must not hang
// a listing that opens it.
func init() {
	lineDamage = append(lineDamage, damageCase{"head blob that is a FIFO", func(t *testing.T, _ *rand.Rand, casDir string, s threads.Source, c, _ chain) (string, string) {
		replaceBlob(t, casDir, c.head(s), func(p string) error { return syscall.Mkfifo(p, 0o644) })
		return c.head(s), c.start
	}})
}
