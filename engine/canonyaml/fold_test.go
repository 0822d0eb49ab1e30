package canonyaml

import "testing"

// TestFoldFlowLinesBranches pins foldFlowLines on cases the emitter tests
// reach rarely or never (the \U escape only a direct call can give it).
// The expected outputs are those of yaml 2.8.4 foldFlowLines (lineWidth 80,
// minContentWidth 20) called with the same arguments.
func TestFoldFlowLinesBranches(t *testing.T) {
	t.Parallel()
	modes := map[string]foldMode{"flow": foldFlow, "block": foldBlock, "quoted": foldQuoted}
	for _, c := range []struct {
		name, text    string
		indent        int
		mode          string
		indentAtStart int
		want          string
		overflow      bool
	}{
		{"block: more-indented first lines are kept", "    kept as it is, however long it runs on and on and on and on and on and on\nthen folded words folded words folded words folded words folded words folded words folded words folded words folded words folded words folded words folded words ", 2, "block", -1,
			"    kept as it is, however long it runs on and on and on and on and on and on\nthen folded words folded words folded words folded words folded words folded\n  words folded words folded words folded words folded words folded words folded\n  words ", false},
		{"quoted: no fold inside a \\u escape", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9bbbbbbbbbbbbbbbbbbbb", 2, "quoted", 0,
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\\n  \\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9bbbbbbbbbbbbbbbbbbbb", false},
		{"quoted: no fold inside a \\U escape", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\U0001F600\\U0001F600\\U0001F600\\U0001F600bbbbbbbbbbbbbbbbbbbb", 2, "quoted", 0,
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\\n  \\U0001F600\\U0001F600\\U0001F600\\U0001F600bbbbbbbbbbbbbbbbbbbb", false},
		{"quoted: no fold inside a \\x escape", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\x41\\x41\\x41\\x41\\x41\\x41bbbbbbbbbbbbbbbbbbbb", 2, "quoted", 0,
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\x41\\\n  \\x41\\x41\\x41\\x41\\x41bbbbbbbbbbbbbbbbbbbb", false},
		{"quoted: trailing spaces run past the width", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa      bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 0, "quoted", 0,
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa      \\\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", true},
		{"flow: an unbreakable line overflows", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa b", 2, "flow", 0,
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n  b", true},
		{"flow: no room at the start folds at once", "word more words more words more words more words more words more words more words more words more words more words ", 4, "flow", 70,
			"\n    word more words more words more words more words more words more words more\n    words more words more words more words ", false},
	} {
		var overflow bool
		if got := string(foldFlowLines([]byte(c.text), c.indent, modes[c.mode], c.indentAtStart, &overflow)); got != c.want || overflow != c.overflow {
			t.Errorf("%s:\n got %q (overflow %v)\nwant %q (overflow %v)", c.name, got, overflow, c.want, c.overflow)
		}
		u := make([]uint16, len(c.text))
		for i := range len(c.text) {
			u[i] = uint16(c.text[i])
		}
		got16 := foldFlowLines(u, c.indent, modes[c.mode], c.indentAtStart, nil)
		b := make([]byte, len(got16))
		for i, x := range got16 {
			b[i] = byte(x)
		}
		if string(b) != c.want {
			t.Errorf("%s, in UTF-16 units: got %q", c.name, b)
		}
	}
}
