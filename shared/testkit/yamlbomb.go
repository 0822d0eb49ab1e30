package testkit

import (
	"fmt"
	"strings"
)

// AliasBomb returns YAML mapping entries, every line starting with indent,
// that define eight 4,000-character strings (s0 to s7) and lists l1 to
// l<levels>, each of eight aliases to the one before (l1: to the strings).
// The text is about 32 KB; expanded, l<levels> holds 8^levels strings
// (levels 6: a gigabyte). It is the shape of the workflow that once took
// `workflow add` past 3 GB of memory, for tests that parsers refuse it.
func AliasBomb(indent string, levels int) string {
	var b strings.Builder
	refs := make([]string, 8)
	for i := range refs {
		fmt.Fprintf(&b, "%ss%d: &s%d %q\n", indent, i, i, strings.Repeat(string(rune('a'+i)), 4000))
		refs[i] = fmt.Sprintf("*s%d", i)
	}
	fmt.Fprintf(&b, "%sl1: &l1 [%s]\n", indent, strings.Join(refs, ", "))
	for k := 2; k <= levels; k++ {
		prev := fmt.Sprintf("*l%d", k-1)
		fmt.Fprintf(&b, "%sl%d: &l%d [%s]\n", indent, k, k, strings.Repeat(prev+", ", 7)+prev)
	}
	return b.String()
}

// AliasBombWorkflow is a YAML workflow, valid but for AliasBomb (six
// levels) in a role's schema default: the report's 32 KB that expand to
// about a gigabyte, few enough values to pass yaml.v3's 4M-value cap.
func AliasBombWorkflow() string {
	return `version: 1
description: An alias bomb in a schema default.
agents:
  w: {type: exec, command: /bin/true}
roles:
  writer:
    description: Writes.
    prompt: Write.
    agent: w
    output:
      type: object
      properties:
        x:
          type: object
          default:
` + AliasBomb("            ", 6) + `graph:
  __start__: writer
  writer: __end__
`
}
