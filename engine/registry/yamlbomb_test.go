package registry

import (
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// A workflow.yaml holding an alias bomb (it is a file users edit) is
// refused with the limit named.
func TestParseRefusesAliasBomb(t *testing.T) {
	t.Parallel()
	src := "workflows: {}\nconfig:\n  maxDepth: 1\n  providers: {}\n  models: {}\n  junk:\n" + testkit.AliasBomb("    ", 6)
	if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("Parse(bomb) = %v", err)
	}
}
