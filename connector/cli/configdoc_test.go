package cli

import (
	"flag"
	"testing"

	"github.com/uncaged/workflow/shared/envflag"
)

var update = flag.Bool("update", false, "rewrite this binary's part of docs/configuration.md")

// docs/configuration.md lists every flag of the command tree, with its
// variables and default; it is generated from the tree, so it cannot drift.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()
	root := newRoot(Env{Getenv: func(string) string { return "" }})
	err := envflag.CheckSection("../../docs/configuration.md", "uncaged-workflow", envflag.Markdown(root),
		"go test ./connector/cli -run TestConfigurationDoc -update", *update)
	if err != nil {
		t.Fatal(err)
	}
}
