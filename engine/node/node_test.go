package node

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
)

func hashOf(t *testing.T, n Node) (string, string) {
	t.Helper()
	b, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b), ids.HashBytes(b)
}

// Nodes hashed by the original implementation (its yaml library, 2.8.4);
// docs/compatibility.md, "Store".
func TestContentVectors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		payload string
		refs    []string
		yaml    string
		hash    string
	}{
		{"hello", nil, "type: content\npayload: hello\nrefs: []\n", "SSVQ0RZ55P9Y4"},
		{"prompt-text", nil, "type: content\npayload: prompt-text\nrefs: []\n", "D7V7WGCMTYHZG"},
		{"", nil, "type: content\npayload: \"\"\nrefs: []\n", "7T60FRC184B7T"},
		{"line1\nline2\nline3", nil, "type: content\npayload: |-\n  line1\n  line2\n  line3\nrefs: []\n", "74VMNFKN1BT94"},
		{"trailing\n", nil, "type: content\npayload: |\n  trailing\nrefs: []\n", "FEZHCNNWNQPHC"},
		{`{"plan":1}`, nil, "type: content\npayload: '{\"plan\":1}'\nrefs: []\n", "CM1JEP407C6T6"},
		{"123", nil, "type: content\npayload: \"123\"\nrefs: []\n", "W2JM265ECE5R8"},
		{"true", nil, "type: content\npayload: \"true\"\nrefs: []\n", "WPZHA1QXREGTR"},
		{"null", nil, "type: content\npayload: \"null\"\nrefs: []\n", "G420H3MD8BQ82"},
		{"a: b", nil, "type: content\npayload: \"a: b\"\nrefs: []\n", "SDV2AG24DZP8R"},
		{"fix #191", nil, "type: content\npayload: \"fix #191\"\nrefs: []\n", "SPJ7STE46NM9W"},
		{strings.Repeat("x", 81) + " y", nil, "type: content\npayload: " + strings.Repeat("x", 81) + "\n  y\nrefs: []\n", "C1ES38J78CGV2"},
		{"plan body", []string{"SSVQ0RZ55P9Y4", "D7V7WGCMTYHZG"}, "type: content\npayload: plan body\nrefs:\n  - SSVQ0RZ55P9Y4\n  - D7V7WGCMTYHZG\n", "H8J5NDH0362YW"},
	}
	for _, c := range cases {
		y, h := hashOf(t, NewContent(c.payload, c.refs))
		if y != c.yaml {
			t.Errorf("content %q:\n got %q\nwant %q", c.payload, y, c.yaml)
		}
		if h != c.hash {
			t.Errorf("content %q: hash %s want %s", c.payload, h, c.hash)
		}
	}
}

func TestStartStateEndVectors(t *testing.T) {
	t.Parallel()
	start := NewStart(StartPayload{Name: "demo", Hash: "BUNDLEAAAAAAA", Depth: 0}, "SSVQ0RZ55P9Y4")
	y, h := hashOf(t, start)
	wantStart := "type: start\npayload:\n  name: demo\n  hash: BUNDLEAAAAAAA\n  depth: 0\n  parentState: null\nrefs:\n  - SSVQ0RZ55P9Y4\n"
	if y != wantStart || h != "TE2CRJNW51W4G" {
		t.Fatalf("start node:\n got %q (%s)\nwant %q (TE2CRJNW51W4G)", y, h, wantStart)
	}
	_, contentHash := hashOf(t, NewContent("plan-text", nil))
	if contentHash != "DT9SXZ9XNSHGY" {
		t.Fatalf("content(plan-text) = %s", contentHash)
	}
	state := NewState(StatePayload{
		Role: "planner", Meta: canonyaml.Map{{Key: "plan", Value: 1.0}},
		Start: h, Content: contentHash, Ancestors: Ancestors("", nil), Timestamp: 1000,
	})
	y, sh := hashOf(t, state)
	wantState := "type: state\npayload:\n  role: planner\n  meta:\n    plan: 1\n  start: TE2CRJNW51W4G\n  content: DT9SXZ9XNSHGY\n  ancestors: []\n  compact: null\n  timestamp: 1000\n  childThread: null\nrefs:\n  - TE2CRJNW51W4G\n  - DT9SXZ9XNSHGY\n"
	if y != wantState || sh != "EY4NX8J6373TT" {
		t.Fatalf("state node:\n got %q (%s)\nwant %q (EY4NX8J6373TT)", y, sh, wantState)
	}
	_, doneHash := hashOf(t, NewContent("done", nil))
	end := NewState(StatePayload{
		Role: RoleEnd, Meta: canonyaml.Map{{Key: "returnCode", Value: 0.0}, {Key: "summary", Value: "done"}},
		Start: h, Content: doneHash, Ancestors: Ancestors(sh, state.Payload.Ancestors), Timestamp: 2000,
	})
	if _, eh := hashOf(t, end); eh != "DXAGP9TW6ZX9Y" {
		t.Fatalf("end node hash %s, want DXAGP9TW6ZX9Y", eh)
	}
	if !end.IsEnd() || end.ReturnCode() != 0 || end.Summary() != "done" {
		t.Fatalf("end accessors: %v %d %q", end.IsEnd(), end.ReturnCode(), end.Summary())
	}
}

func TestCollectRefs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    StatePayload
		want []string
	}{
		{StatePayload{Start: "S", Content: "C", Ancestors: []string{"A1", "A2"}, Compact: "COMPACT"}, []string{"S", "C", "A1", "A2", "COMPACT"}},
		{StatePayload{Start: "S", Content: "C", Ancestors: []string{"A1"}}, []string{"S", "C", "A1"}},
		{StatePayload{Start: "S", Content: "C", Ancestors: []string{}}, []string{"S", "C"}},
		{StatePayload{Start: "S3", Content: "C3", Ancestors: []string{"A3"}, ChildThread: "CHILDEND"}, []string{"S3", "C3", "A3", "CHILDEND"}},
		{StatePayload{Start: "S", Content: "C"}, []string{"S", "C"}},
	}
	for _, c := range cases {
		if got := CollectRefs(c.p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("CollectRefs = %v, want %v", got, c.want)
		}
	}
}

func TestStartRefs(t *testing.T) {
	t.Parallel()
	if got := NewStart(StartPayload{Name: "a"}, "P").Refs; !reflect.DeepEqual(got, []string{"P"}) {
		t.Errorf("refs without parent = %v", got)
	}
	if got := NewStart(StartPayload{Name: "a", ParentState: "PS"}, "P").Refs; !reflect.DeepEqual(got, []string{"P", "PS"}) {
		t.Errorf("refs with parent = %v", got)
	}
}

func TestAncestorsCap(t *testing.T) {
	t.Parallel()
	var chain []string
	parent := ""
	for i := 0; i < 20; i++ {
		anc := Ancestors(parent, chain)
		if len(anc) > AncestorsCap {
			t.Fatalf("step %d: %d ancestors", i, len(anc))
		}
		if i > 0 && anc[0] != parent {
			t.Fatalf("ancestors[0] = %s, want parent %s", anc[0], parent)
		}
		want := i
		if want > AncestorsCap {
			want = AncestorsCap
		}
		if len(anc) != want {
			t.Fatalf("step %d: len %d want %d", i, len(anc), want)
		}
		parent, chain = string(rune('a'+i)), anc
	}
}

func TestParseRoundTrip(t *testing.T) {
	t.Parallel()
	start := NewStart(StartPayload{Name: "demo", Hash: "BUNDLEAAAAAAA", Depth: 2, ParentState: "EY4NX8J6373TT"}, "SSVQ0RZ55P9Y4")
	state := NewState(StatePayload{
		Role: "coder", Meta: canonyaml.Map{{Key: "z", Value: "last"}, {Key: "a", Value: canonyaml.Map{{Key: "n", Value: 1.5}}}, {Key: "list", Value: []any{"x", true, nil}}},
		Start: "TE2CRJNW51W4G", Content: "DT9SXZ9XNSHGY", Ancestors: []string{"EY4NX8J6373TT"}, Timestamp: 1716000000000, ChildThread: "DXAGP9TW6ZX9Y",
	})
	for _, n := range []Node{NewContent("multi\nline: text\n", []string{"SSVQ0RZ55P9Y4"}), start, state} {
		b, err := n.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b)
		if err != nil {
			t.Fatalf("parse %s: %v\n%s", n.Type(), err, b)
		}
		b2, _ := back.Marshal()
		if string(b2) != string(b) {
			t.Errorf("%s round trip changed bytes:\n%s\n---\n%s", n.Type(), b, b2)
		}
		if !reflect.DeepEqual(RefsOf(b), n.References()) {
			t.Errorf("RefsOf(%s) = %v, want %v", n.Type(), RefsOf(b), n.References())
		}
		if !IsNodeYAML(b) {
			t.Errorf("IsNodeYAML(%s) = false", n.Type())
		}
	}
}

func TestParseLegacyAndExtraFields(t *testing.T) {
	t.Parallel()
	legacyStart := "type: start\npayload:\n  name: demo\n  hash: H\n  depth: 0\n  maxRounds: 5\nrefs:\n  - P\n"
	n, err := Parse([]byte(legacyStart))
	if err != nil {
		t.Fatal(err)
	}
	if s := n.(Start); s.Payload.ParentState != "" || s.Payload.Name != "demo" {
		t.Errorf("legacy start = %+v", s)
	}
	legacyState := "type: state\npayload:\n  role: r\n  meta: {}\n  start: S\n  content: C\n  ancestors: []\n  compact: null\n  timestamp: 5\n  extra: ignored\nrefs: [S, C]\nunknownTop: 1\n"
	st, err := ParseState([]byte(legacyState))
	if err != nil {
		t.Fatal(err)
	}
	if st.Payload.ChildThread != "" || st.Payload.Timestamp != 5 {
		t.Errorf("legacy state = %+v", st)
	}
	if got := RefsOf([]byte(legacyState)); !reflect.DeepEqual(got, []string{"S", "C"}) {
		t.Errorf("RefsOf flow refs = %v", got)
	}
	children := "type: content\npayload: old\nchildren:\n  - A\n"
	c, err := Parse([]byte(children))
	if err != nil || !reflect.DeepEqual(c.References(), []string{"A"}) {
		t.Errorf("legacy children: %v %v", c, err)
	}
	if !reflect.DeepEqual(RefsOf([]byte(children)), []string{"A"}) {
		t.Errorf("RefsOf children = %v", RefsOf([]byte(children)))
	}
	legacyMerkle := "type: step\npayload:\n  role: x\nchildren: []\n"
	if !IsNodeYAML([]byte(legacyMerkle)) {
		t.Error("legacy merkle step node not recognised")
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                            "empty document",
		"just text":                   "not a mapping",
		"- a\n- b\n":                  "not a mapping",
		"type: [\n":                   "invalid YAML",
		"payload: x\nrefs: []\n":      "missing string \"type\"",
		"type: 5\nrefs: []\n":         "missing string \"type\"",
		"type: content\npayload: x\n": "\"refs\" must be a list",
		"type: content\npayload: x\nrefs: [1, 2]\n":                                                                 "\"refs\" must be a list",
		"type: content\npayload: {a: 1}\nrefs: []\n":                                                                "content payload must be a string",
		"type: start\npayload: x\nrefs: []\n":                                                                       "start payload must be a mapping",
		"type: start\npayload: {name: n, hash: h}\nrefs: []\n":                                                      "depth must be a number",
		"type: start\npayload: {name: n, hash: h, depth: 0, parentState: 3}\nrefs: []\n":                            "parentState must be a string or null",
		"type: state\npayload: {role: r, start: s, content: c, timestamp: 1, ancestors: [], meta: [1]}\nrefs: []\n": "meta must be a mapping",
		"type: state\npayload: {role: r, start: s, content: c, timestamp: x, ancestors: [], meta: {}}\nrefs: []\n":  "timestamp must be a number",
		"type: state\npayload: {role: r, start: s, content: c, timestamp: 1, meta: {}}\nrefs: []\n":                 "ancestors must be a list",
		"type: state\npayload: {start: s, content: c, timestamp: 1, ancestors: [], meta: {}}\nrefs: []\n":           "payload.role must be a string",
		"type: thread\npayload: x\nrefs: []\n":                                                                      "unknown node type \"thread\"",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !errors.Is(err, ErrNotNode) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", in, err, want)
		}
	}
	for _, raw := range []string{"hello", "a: b", "type: content\npayload: x\n", "- x"} {
		if IsNodeYAML([]byte(raw)) {
			t.Errorf("IsNodeYAML(%q) = true", raw)
		}
	}
	if RefsOf([]byte("type: [")) != nil || RefsOf([]byte("hello")) != nil {
		t.Error("unparseable blobs must have no refs")
	}
}

func TestScanRefsFallsBackOnOddTails(t *testing.T) {
	t.Parallel()
	// A hand-written node whose refs are not canonical hashes still yields them via YAML.
	odd := "type: content\npayload: x\nrefs:\n  - not-a-hash\n"
	if got := RefsOf([]byte(odd)); !reflect.DeepEqual(got, []string{"not-a-hash"}) {
		t.Errorf("got %v", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("type: content\npayload: hello\nrefs: []\n"))
	f.Add([]byte("type: state\npayload:\n  role: r\n  meta: {}\n  start: S\n  content: C\n  ancestors: []\n  compact: null\n  timestamp: 5\nrefs: [S, C]\n"))
	f.Add([]byte("type: start\npayload:\n  name: demo\n  hash: H\n  depth: 0\nrefs:\n  - P\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Parse(b)
		RefsOf(b)
		IsNodeYAML(b)
		if err != nil {
			return
		}
		out, err := n.Marshal()
		if err != nil {
			return // e.g. invalid UTF-8 inside a payload
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of own output failed: %v\n%s", err, out)
		}
		out2, _ := again.Marshal()
		if string(out) != string(out2) {
			t.Fatalf("serialization not stable:\n%s\n---\n%s", out, out2)
		}
	})
}
