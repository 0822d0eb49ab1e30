package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/shared/testkit"
)

// A blob whose meta is an alias bomb (any program may put one) is not a
// node: reading it fails with the limit named instead of expanding a
// gigabyte, and it counts as plain content.
func TestAliasBombInMetaIsNotANode(t *testing.T) {
	t.Parallel()
	blob := []byte("type: state\npayload:\n  role: r\n  meta:\n" + testkit.AliasBomb("    ", 6) +
		"  start: S\n  content: C\n  ancestors: []\n  compact: null\n  timestamp: 5\nrefs: [S, C]\n")
	_, err := Parse(blob)
	if !errors.Is(err, ErrNotNode) || !errors.Is(err, canonyaml.ErrAliasExpansion) || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("Parse(bomb) = %v", err)
	}
	if IsNodeYAML(blob) {
		t.Fatal("a bomb passes for a node envelope")
	}
	if refs := RefsOf(blob); len(refs) != 0 {
		t.Fatalf("RefsOf(bomb) = %v", refs)
	}
}
