package node

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
)

// Parse reads a stored thread node. It is tolerant the way the original's
// reader is: unknown extra keys are ignored (e.g. the legacy start-node
// maxRounds), a start node without parentState or a state node without
// childThread reads as null, and a content node may carry its refs under the
// legacy key "children". Anything else that is off is an error wrapping
// ErrNotNode that says what.
func Parse(text []byte) (Node, error) {
	fields, err := envelopeFields(text)
	if err != nil {
		return nil, err
	}
	typ, ok := scalarString(fields["type"])
	if !ok {
		return nil, notNode("missing string \"type\"")
	}
	refs, ok := stringSeq(fields["refs"])
	if !ok && typ == TypeContent {
		refs, ok = stringSeq(fields["children"])
	}
	if !ok {
		return nil, notNode("\"refs\" must be a list of strings")
	}
	payload := fields["payload"]
	switch typ {
	case TypeContent:
		s, ok := scalarString(payload)
		if !ok {
			return nil, notNode("content payload must be a string")
		}
		return Content{Payload: s, Refs: refs}, nil
	case TypeStart:
		p, err := parseStartPayload(payload)
		if err != nil {
			return nil, err
		}
		return Start{Payload: p, Refs: refs}, nil
	case TypeState:
		p, err := parseStatePayload(payload)
		if err != nil {
			return nil, err
		}
		return State{Payload: p, Refs: refs}, nil
	}
	return nil, notNode(fmt.Sprintf("unknown node type %q", typ))
}

// ParseState parses text that must be a state node.
func ParseState(text []byte) (State, error) {
	n, err := Parse(text)
	if err != nil {
		return State{}, err
	}
	s, ok := n.(State)
	if !ok {
		return State{}, notNode(fmt.Sprintf("expected a state node, found %s", n.Type()))
	}
	return s, nil
}

// IsNodeYAML reports whether text is already a node envelope (a mapping with a
// string "type" and a string-list "refs"), or a node of the legacy Merkle API
// (type content/step/thread with string "children"). The CAS stores such text
// unchanged instead of wrapping it into a content node.
func IsNodeYAML(text []byte) bool {
	fields, err := envelopeFields(text)
	if err != nil {
		return false
	}
	typ, ok := scalarString(fields["type"])
	if !ok {
		return false
	}
	if _, ok := stringSeq(fields["refs"]); ok {
		return true
	}
	switch typ {
	case "content", "step", "thread":
	default:
		return false
	}
	if _, ok := stringSeq(fields["children"]); !ok {
		return false
	}
	p := fields["payload"]
	return p != nil && (isStringNode(p) || p.Kind == yaml.MappingNode)
}

// RefsOf returns the hashes a stored blob points to, for reachability: the
// string entries of "refs", or of the legacy "children" when "refs" is not a
// list. Unparseable blobs have none. Blobs this package wrote are read by a
// line scan, which is what lets GC walk a million nodes quickly.
func RefsOf(text []byte) []string {
	if refs, ok := scanRefs(text); ok {
		return refs
	}
	fields, err := envelopeFields(text)
	if err != nil {
		return nil
	}
	seq := fields["refs"]
	if seq == nil || seq.Kind != yaml.SequenceNode {
		seq = fields["children"]
	}
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return nil
	}
	var out []string
	for _, item := range seq.Content {
		if s, ok := scalarString(item); ok {
			out = append(out, s)
		}
	}
	return out
}

// scanRefs recognises the tail the canonical serializer writes — "refs: []"
// or "refs:" followed by "  - HASH" lines — as the last top-level key.
func scanRefs(text []byte) ([]string, bool) {
	if !bytes.HasPrefix(text, []byte("type: ")) {
		return nil, false
	}
	i := bytes.LastIndex(text, []byte("\nrefs:"))
	if i < 0 {
		return nil, false
	}
	rest := text[i+len("\nrefs:"):]
	if string(rest) == " []\n" {
		return []string{}, true
	}
	if len(rest) == 0 || rest[0] != '\n' {
		return nil, false
	}
	rest = rest[1:]
	const item = len("  - ") + ids.HashLen + 1
	if len(rest) == 0 || len(rest)%item != 0 {
		return nil, false
	}
	refs := make([]string, 0, len(rest)/item)
	for ; len(rest) > 0; rest = rest[item:] {
		line := rest[:item]
		h := string(line[4 : 4+ids.HashLen])
		if string(line[:4]) != "  - " || line[item-1] != '\n' || !ids.IsHash(h) {
			return nil, false
		}
		refs = append(refs, h)
	}
	return refs, true
}

func parseStartPayload(p *yaml.Node) (StartPayload, error) {
	f, ok := mappingFields(p)
	if !ok {
		return StartPayload{}, notNode("start payload must be a mapping")
	}
	var out StartPayload
	if out.Name, ok = scalarString(f["name"]); !ok {
		return out, notNode("start payload.name must be a string")
	}
	if out.Hash, ok = scalarString(f["hash"]); !ok {
		return out, notNode("start payload.hash must be a string")
	}
	depth, ok := scalarNumber(f["depth"])
	if !ok {
		return out, notNode("start payload.depth must be a number")
	}
	out.Depth = int64(depth)
	if out.ParentState, ok = nullableString(f["parentState"]); !ok {
		return out, notNode("start payload.parentState must be a string or null")
	}
	return out, nil
}

func parseStatePayload(p *yaml.Node) (StatePayload, error) {
	f, ok := mappingFields(p)
	if !ok {
		return StatePayload{}, notNode("state payload must be a mapping")
	}
	var out StatePayload
	for _, field := range []struct {
		key string
		dst *string
	}{{"role", &out.Role}, {"start", &out.Start}, {"content", &out.Content}} {
		if *field.dst, ok = scalarString(f[field.key]); !ok {
			return out, notNode("state payload." + field.key + " must be a string")
		}
	}
	ts, ok := scalarNumber(f["timestamp"])
	if !ok {
		return out, notNode("state payload.timestamp must be a number")
	}
	out.Timestamp = int64(ts)
	if out.Compact, ok = nullableString(f["compact"]); !ok {
		return out, notNode("state payload.compact must be a string or null")
	}
	if out.Ancestors, ok = stringSeq(f["ancestors"]); !ok {
		return out, notNode("state payload.ancestors must be a list of strings")
	}
	if out.ChildThread, ok = nullableString(f["childThread"]); !ok {
		return out, notNode("state payload.childThread must be a string or null")
	}
	m := f["meta"]
	if m == nil || m.Kind != yaml.MappingNode {
		return out, notNode("state payload.meta must be a mapping")
	}
	meta, err := canonyaml.FromYAML(m)
	if err != nil {
		return out, notNode("state payload.meta: " + err.Error())
	}
	if out.Meta, ok = meta.(canonyaml.Map); !ok {
		return out, notNode("state payload.meta must be a mapping")
	}
	return out, nil
}

func notNode(why string) error { return fmt.Errorf("%w: %s", ErrNotNode, why) }

// envelopeFields parses text as a single YAML mapping and indexes its
// top-level keys. Blobs come from anywhere (another implementation, `cas
// put`, the API), so an alias bomb is refused before anything expands it.
func envelopeFields(text []byte) (map[string]*yaml.Node, error) {
	doc, err := canonyaml.ParseYAML(text)
	if errors.Is(err, canonyaml.ErrAliasExpansion) {
		return nil, fmt.Errorf("%w: %w", ErrNotNode, err)
	}
	if err != nil {
		return nil, notNode("invalid YAML: " + err.Error())
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, notNode("empty document")
	}
	f, ok := mappingFields(doc.Content[0])
	if !ok {
		return nil, notNode("document is not a mapping")
	}
	return f, nil
}

func mappingFields(n *yaml.Node) (map[string]*yaml.Node, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, false
	}
	f := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		f[n.Content[i].Value] = deref(n.Content[i+1])
	}
	return f, true
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isStringNode(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}

func scalarString(n *yaml.Node) (string, bool) {
	if !isStringNode(n) {
		return "", false
	}
	return n.Value, true
}

func nullableString(n *yaml.Node) (string, bool) {
	if n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		return "", true
	}
	return scalarString(n)
}

func scalarNumber(n *yaml.Node) (float64, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return 0, false
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
	default:
		return 0, false
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func stringSeq(n *yaml.Node) ([]string, bool) {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		s, ok := scalarString(deref(item))
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
