package yamlwf

import (
	"fmt"
	"strings"
	"testing"
)

// syntaxBase is a valid workflow whose lines the cases below break.
var syntaxBase = []string{
	"version: 1",        // 1
	"description: demo", // 2
	"agent: {type: exec, command: /bin/true}", // 3
	"roles:",                     // 4
	"  planner:",                 // 5
	"    description: plans",     // 6
	"    prompt: |",              // 7
	"      You plan.",            // 8
	"    output: {type: object}", // 9
	"  reviewer:",                // 10
	"    description: reviews",   // 11
	"    prompt: review",         // 12
	"graph:",                     // 13
	"  __start__: planner",       // 14
	"  planner: reviewer",        // 15
}

// An indentation slip is reported at the line where it is, not at the
// start of the block yaml.v3 was in (it said "yaml: line 5" for a slip on
// line 9); errors it already placed right keep their line.
func TestSyntaxErrorsNameTheLineOfTheSlip(t *testing.T) {
	t.Parallel()
	if _, err := Parse([]byte(strings.Join(syntaxBase, "\n") + "\n")); err != nil {
		t.Fatalf("the base workflow: %v", err)
	}
	for _, tc := range []struct {
		line int    // 1-based line replaced
		with string // its new text
		want int    // the line the error must name
	}{
		{9, "     output: {type: object}", 9},            // one space too many, after a block scalar (yaml.v3 said line 5)
		{9, "   output: {type: object}", 9},              // one too few (yaml.v3 said line 4)
		{6, "     description: plans", 7},                // the first key sets the block's indent: the next line breaks it (line 4)
		{12, "     prompt: review", 12},                  // yaml.v3 named these lines itself
		{12, "      prompt: review", 12},                 //
		{15, "    planner: reviewer", 15},                //
		{14, " __start__: planner", 15},                  //
		{11, "\tdescription: reviews", 11},               // a tab
		{3, "agent: {type: exec, command: /bin/true", 3}, // an unclosed flow mapping (line 2)
		{8, "  You plan.", 8},                            // a block scalar less indented than its key
		{10, " reviewer:", 10},                           // a role one space out (line 9)
	} {
		t.Run(fmt.Sprintf("line %d", tc.line), func(t *testing.T) {
			lines := append([]string(nil), syntaxBase...)
			lines[tc.line-1] = tc.with
			_, err := Parse([]byte(strings.Join(lines, "\n") + "\n"))
			if err == nil {
				t.Fatal("no error")
			}
			if prefix := fmt.Sprintf("yaml: line %d: ", tc.want); !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q, want %q…", err, prefix)
			}
		})
	}
}

// A slip in a second document, and a file without a final newline, are
// placed the same way.
func TestSyntaxErrorLineInOtherShapes(t *testing.T) {
	t.Parallel()
	doc := strings.Join(syntaxBase, "\n")
	broken := strings.Replace(doc, "    prompt: review", "     prompt: review", 1)
	if _, err := Parse([]byte(broken)); err == nil || !strings.HasPrefix(err.Error(), "yaml: line 12: ") {
		t.Errorf("no final newline: %v", err)
	}
	if _, err := Parse([]byte(doc + "\n---\n" + broken + "\n")); err == nil || !strings.HasPrefix(err.Error(), "yaml: line 28: ") {
		t.Errorf("second document: %v", err)
	}
}
