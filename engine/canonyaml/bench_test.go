package canonyaml

import (
	"fmt"
	"testing"
)

// stateNode is a typical state node of a thread: a payload with a meta
// mapping, eleven ancestors and the refs list.
func stateNode() Map {
	ancestors := make([]string, 11)
	for i := range ancestors {
		ancestors[i] = fmt.Sprintf("A%012d", i)
	}
	refs := append([]string{"TE2CRJNW51W4G", "DT9SXZ9XNSHGY"}, ancestors...)
	return Map{
		{"type", "state"},
		{"payload", Map{
			{"role", "coder"},
			{"meta", Map{
				{"plan", 1.0},
				{"summary", "Implemented the emitter and added tests; all vectors pass."},
				{"files", []any{"engine/canonyaml/scalar.go", "engine/canonyaml/fold.go"}},
				{"returnCode", 0.0},
			}},
			{"start", "TE2CRJNW51W4G"},
			{"content", "DT9SXZ9XNSHGY"},
			{"ancestors", ancestors},
			{"compact", nil},
			{"timestamp", 1718000000000.0},
			{"childThread", nil},
		}},
		{"refs", refs},
	}
}

func BenchmarkMarshalStateNode(b *testing.B) {
	v := stateNode()
	out, err := Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalContentNode writes a content node with a multi-line
// markdown payload, which takes the block scalar paths.
func BenchmarkMarshalContentNode(b *testing.B) {
	payload := "# Plan\n\n1. Read the specification of the emitter carefully, then write the code.\n" +
		"2. Generate vectors with the reference implementation and compare byte for byte.\n\n" +
		"```go\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n```\n\nA long closing paragraph that goes on for more than eighty columns so that it has to be folded.\n"
	v := Map{{"type", "content"}, {"payload", payload}, {"refs", []string{}}}
	out, err := Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
