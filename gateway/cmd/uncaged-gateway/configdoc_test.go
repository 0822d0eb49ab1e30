package main

import (
	"flag"
	"testing"

	"github.com/uncaged/workflow/shared/envflag"
)

var update = flag.Bool("update", false, "rewrite this binary's part of docs/configuration.md")

// docs/configuration.md lists every flag of the command tree, with its
// variables and default; it is generated from the tree, so it cannot drift.
//
// Serial: the tree's defaults include the package-level logFlags, which
// the tests that run commands set.
func TestConfigurationDoc(t *testing.T) {
	err := envflag.CheckSection("../../../docs/configuration.md", "uncaged-gateway", envflag.Markdown(newRoot()),
		"go test ./gateway/cmd/uncaged-gateway -run TestConfigurationDoc -update", *update)
	if err != nil {
		t.Fatal(err)
	}
}
