package node

import (
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// BenchmarkParseStateNode reads a typical state node, the hottest parse
// (thread show, live, resume): no aliases, so no '*' to look into.
func BenchmarkParseStateNode(b *testing.B) {
	ancestors := []string{"A000000000000", "A000000000001", "A000000000002", "A000000000003"}
	blob, err := NewState(StatePayload{Role: "coder", Start: "TE2CRJNW51W4G", Content: "DT9SXZ9XNSHGY", Ancestors: ancestors, Timestamp: 1718000000000,
		Meta: canonyaml.Map{{Key: "status", Value: "approved"}, {Key: "summary", Value: "Implemented the emitter and added tests."}, {Key: "files", Value: []any{"a.go", "b.go"}}}}).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	benchParse(b, blob)
}

// BenchmarkParseContentNode reads a content node of markdown, whose '*'
// (bold, bullets) makes the alias check walk the tree.
func BenchmarkParseContentNode(b *testing.B) {
	blob, err := NewContent("# Plan\n\n* **Read** the emitter.\n* Write *tests* first.\n\n```go\nfunc main() {}\n```\n", nil).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	benchParse(b, blob)
}

func benchParse(b *testing.B, blob []byte) {
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(blob); err != nil {
			b.Fatal(err)
		}
	}
}
