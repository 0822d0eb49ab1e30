package canonyaml

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/shared/testkit"
)

// allocated returns how many bytes fn allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The report's bomb (8-way aliases over 4,000-character strings, about a
// gigabyte expanded, under the 4M-value cap) is refused by ParseYAML and by
// FromYAML on a tree parsed without the check, with an error naming the
// limit, after allocating little more than the document's own tree.
//
// Not parallel: allocated counts the whole process's allocations, and the
// package's parallel tests wait while a sequential one runs.
func TestAliasBombRefusedBySize(t *testing.T) {
	src := []byte("default:\n" + testkit.AliasBomb("  ", 6))
	var err error
	if n := allocated(func() { _, err = ParseYAML(src) }); n > 16<<20 {
		t.Errorf("ParseYAML allocated %d MB refusing a %d KB document", n>>20, len(src)>>10)
	}
	if !errors.Is(err, ErrAliasExpansion) || !strings.Contains(err.Error(), "16 MiB") || !strings.Contains(err.Error(), "*s0 at line 10") {
		t.Fatalf("ParseYAML(bomb) = %v", err)
	}
	doc := parseYAML(t, string(src))
	if n := allocated(func() { _, err = FromYAML(doc) }); n > 16<<20 {
		t.Errorf("FromYAML allocated %d MB refusing the bomb", n>>20)
	}
	if !errors.Is(err, ErrAliasExpansion) {
		t.Fatalf("FromYAML(bomb) = %v", err)
	}
	// Many small values are no way around the limit: each counts.
	var b strings.Builder
	b.WriteString("a0: &a0 ['', '', '', '', '', '', '', '']\n")
	for i := 1; i <= 7; i++ {
		p := "*a" + itoa(i-1)
		b.WriteString("a" + itoa(i) + ": &a" + itoa(i) + " [" + strings.Repeat(p+", ", 7) + p + "]\n")
	}
	if _, err := ParseYAML([]byte(b.String())); !errors.Is(err, ErrAliasExpansion) {
		t.Fatalf("a bomb of empty strings: %v", err)
	}
	// Merge keys are aliases too.
	b.Reset()
	b.WriteString("m0: &m0 {k: " + strings.Repeat("x", 64<<10) + "}\n")
	for i := 1; i <= 300; i++ {
		b.WriteString("m" + itoa(i) + ": {<<: *m0}\n")
	}
	if _, err := ParseYAML([]byte(b.String())); !errors.Is(err, ErrAliasExpansion) {
		t.Fatalf("merge keys over a 64 KiB string: %v", err)
	}
}

// The limit is on what aliases add: up to MaxAliasExpansion bytes pass,
// one more does not; documents without aliases pass whatever their size;
// ordinary reuse passes.
func TestAliasExpansionLimit(t *testing.T) {
	t.Parallel()
	// 256 aliases to a string of L bytes add 256·L bytes (each alias
	// is a value as written and as expanded).
	for _, c := range []struct {
		extra int
		ok    bool
	}{{0, true}, {1, false}} {
		src := "s: &s " + strings.Repeat("x", MaxAliasExpansion/256+c.extra) + "\nl: [" + strings.Repeat("*s, ", 255) + "*s]\n"
		_, err := ParseYAML([]byte(src))
		if (err == nil) != c.ok {
			t.Errorf("string of MaxAliasExpansion/256%+d bytes aliased 256 times: %v", c.extra, err)
		}
	}
	if _, err := ParseYAML([]byte("a: x\nb: ['*', '**']\n")); err != nil {
		t.Fatalf("stars that are no aliases: %v", err)
	}
	big := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: strings.Repeat("y", MaxAliasExpansion+1)}}}
	if err := CheckAliasExpansion(big); err != nil {
		t.Fatalf("a large document without aliases: %v", err)
	}
	reuse := "defs:\n  agent: &agent {type: exec, command: ./run.sh, timeout: 60000}\n  schema: &schema {type: object, properties: {status: {enum: [approved, rejected]}}}\nroles:\n"
	for i := range 200 {
		reuse += "  r" + itoa(i) + ": {agent: *agent, output: *schema}\n"
	}
	if _, err := ParseYAML([]byte(reuse)); err != nil {
		t.Fatalf("ordinary reuse refused: %v", err)
	}
	if n, err := ParseYAML(nil); err != nil || n.Kind != 0 {
		t.Fatalf("ParseYAML(empty) = %v, %v", n, err)
	}
	if _, err := ParseYAML([]byte("a: [")); err == nil || errors.Is(err, ErrAliasExpansion) {
		t.Fatalf("ParseYAML(malformed) = %v", err)
	}
}

// A subtree whose aliases point outside it is measured with their targets,
// and a recursive alias is an error, not a hang.
func TestCheckAliasExpansionEdges(t *testing.T) {
	t.Parallel()
	doc := parseYAML(t, "s: &s "+strings.Repeat("z", 64<<10)+"\nsub: ["+strings.Repeat("*s, ", 300)+"*s]\n")
	sub := doc.Content[0].Content[3]
	if err := CheckAliasExpansion(sub); !errors.Is(err, ErrAliasExpansion) {
		t.Fatalf("subtree with outside targets: %v", err)
	}
	rec := parseYAML(t, "a: &x [1]\n")
	seq := rec.Content[0].Content[1]
	seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.AliasNode, Value: "x", Alias: seq})
	if err := CheckAliasExpansion(rec); err == nil || !strings.Contains(err.Error(), "recursive alias *x") {
		t.Fatalf("recursive alias: %v", err)
	}
	if err := CheckAliasExpansion(nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkParseYAMLStateNode is the node reader's parse with the check: a
// state node has no '*', so the check is one byte scan.
func BenchmarkParseYAMLStateNode(b *testing.B) {
	src, err := Marshal(stateNode())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseYAML(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckAliasExpansion measures the walk itself on a node tree
// with aliases (a workflow reusing an agent and a schema 50 times).
func BenchmarkCheckAliasExpansion(b *testing.B) {
	src := "defs:\n  agent: &agent {type: exec, command: ./run.sh}\n  schema: &schema {type: object, properties: {status: {enum: [a, b]}}}\nroles:\n"
	for i := range 50 {
		src += "  r" + itoa(i) + ": {agent: *agent, output: *schema}\n"
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckAliasExpansion(&doc); err != nil {
			b.Fatal(err)
		}
	}
}
