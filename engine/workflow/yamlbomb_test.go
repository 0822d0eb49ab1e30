package workflow

import (
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// A descriptor sidecar holding an alias bomb is refused with the limit
// named.
func TestParseDescriptorYAMLRefusesAliasBomb(t *testing.T) {
	t.Parallel()
	src := "roles:\n  a:\n    description: d\n    schema:\n      type: object\n      default:\n" + testkit.AliasBomb("        ", 6) + "graph: {edges: []}\n"
	if _, err := ParseDescriptorYAML([]byte(src)); err == nil || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("ParseDescriptorYAML(bomb) = %v", err)
	}
}
