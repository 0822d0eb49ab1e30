package canonyaml

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FromYAML converts a parsed gopkg.in/yaml.v3 node (a document or a value
// node) into the value tree Marshal accepts: Map, []any, string, float64,
// bool and nil. Mapping order is preserved as written (integer-like keys are
// not moved to the front).
//
// Scalars are typed the way yaml 2.8.4's YAML 1.2 core schema reads them,
// not by yaml.v3's own resolver (which also accepts forms like 0b1010,
// 1_000 or timestamps): an untagged plain scalar is null (~, null, empty),
// a boolean (true/false in three spellings), a number (decimal, 0o octal, 0x
// hex, floats, .inf, .nan) or else a string; quoted and block scalars are
// strings. Explicit tags !!str, !!null, !!bool, !!int and !!float are
// honoured; !!int and !!float values become float64. Aliases are resolved.
// Non-string keys take their JavaScript string form (null becomes "", 1.0
// becomes "1"). An empty document is nil.
//
// Errors are returned for other tags, collections used as keys, duplicate
// keys, recursive aliases and excessive alias expansion (more than 4M
// values, or more than MaxAliasExpansion bytes added: see
// CheckAliasExpansion).
func FromYAML(n *yaml.Node) (any, error) {
	if n == nil {
		return nil, errors.New("canonyaml: nil YAML node")
	}
	c := yamlConverter{root: n, active: map[*yaml.Node]bool{}}
	return c.value(n, 0)
}

// maxYAMLValues bounds the size of the converted tree, which aliases can
// make exponentially larger than the document.
const maxYAMLValues = 1 << 22

type yamlConverter struct {
	root   *yaml.Node
	active map[*yaml.Node]bool // aliased nodes being converted
	count  int
	// measured is set once the tree's alias expansion has been checked:
	// on meeting the first alias, so that trees without aliases (every
	// node this module writes) pay nothing.
	measured bool
}

func yamlErrorf(n *yaml.Node, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if n.Line > 0 {
		return fmt.Errorf("canonyaml: line %d column %d: %s", n.Line, n.Column, msg)
	}
	return fmt.Errorf("canonyaml: %s", msg)
}

func (c *yamlConverter) value(n *yaml.Node, depth int) (any, error) {
	if depth > maxDepth {
		return nil, yamlErrorf(n, "nested deeper than %d levels", maxDepth)
	}
	c.count++
	if c.count > maxYAMLValues {
		return nil, yamlErrorf(n, "document expands to more than %d values", maxYAMLValues)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		switch len(n.Content) {
		case 0:
			return nil, nil
		case 1:
			return c.value(n.Content[0], depth+1)
		}
		return nil, yamlErrorf(n, "document node with %d children", len(n.Content))
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, yamlErrorf(n, "alias *%s without target", n.Value)
		}
		if !c.measured {
			c.measured = true
			if err := CheckAliasExpansion(c.root); err != nil {
				return nil, err
			}
		}
		if c.active[n.Alias] {
			return nil, yamlErrorf(n, "recursive alias *%s", n.Value)
		}
		c.active[n.Alias] = true
		v, err := c.value(n.Alias, depth+1)
		delete(c.active, n.Alias)
		return v, err
	case yaml.SequenceNode:
		if !isDefaultTag(n.Tag, "!!seq") {
			return nil, yamlErrorf(n, "unsupported tag %s on a sequence", n.Tag)
		}
		out := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := c.value(item, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil, yamlErrorf(n, "unsupported node kind %d", n.Kind)
}

func isDefaultTag(tag, want string) bool {
	return tag == "" || tag == "!" || tag == want || tag == "tag:yaml.org,2002:"+want[2:]
}

func (c *yamlConverter) mapping(n *yaml.Node, depth int) (any, error) {
	if !isDefaultTag(n.Tag, "!!map") {
		return nil, yamlErrorf(n, "unsupported tag %s on a mapping", n.Tag)
	}
	if len(n.Content)%2 != 0 {
		return nil, yamlErrorf(n, "mapping node with an odd number of children")
	}
	out := make(Map, 0, len(n.Content)/2)
	// seen records each key's string form and the value it was read from,
	// to tell duplicate keys (an error, as in yaml) from distinct keys with
	// the same string form (1 and "1": the last value wins, as in a
	// JavaScript object).
	seen := make(map[string]any, len(n.Content)/2)
	for i := 0; i < len(n.Content); i += 2 {
		kn := n.Content[i]
		for kn.Kind == yaml.AliasNode && kn.Alias != nil {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			return nil, yamlErrorf(kn, "unsupported mapping key: only scalar keys can be converted")
		}
		kv, err := scalarValue(kn)
		if err != nil {
			return nil, err
		}
		key := keyString(kv)
		v, err := c.value(n.Content[i+1], depth+1)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[key]; dup {
			if sameScalar(prev, kv) {
				return nil, yamlErrorf(kn, "duplicate mapping key %q", key)
			}
			for j := range out {
				if out[j].Key == key {
					out[j].Value = v
				}
			}
			seen[key] = kv
			continue
		}
		seen[key] = kv
		out = append(out, Pair{Key: key, Value: v})
	}
	return out, nil
}

func sameScalar(a, b any) bool {
	fa, aNum := a.(float64)
	fb, bNum := b.(float64)
	if aNum && bNum {
		return fa == fb || math.IsNaN(fa) && math.IsNaN(fb)
	}
	return a == b
}

// keyString is JavaScript's String(key) for a scalar key, with null as "".
func keyString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
		return string(appendJSNumber(nil, x))
	}
	return fmt.Sprint(v)
}

// scalarValue types a scalar node like yaml's core schema.
func scalarValue(n *yaml.Node) (any, error) {
	const quotedOrBlock = yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle
	tag := n.Tag
	explicit := n.Style&yaml.TaggedStyle != 0
	if !explicit && tag != "" && tag != "!" && tag != "!!merge" {
		// A tag set by yaml.v3's resolver (or its parser, which tags a plain
		// "<<" as !!merge) is not a statement about the value; one set by
		// hand that differs from it is.
		implicit := (&yaml.Node{Kind: yaml.ScalarNode, Value: n.Value, Style: n.Style &^ yaml.TaggedStyle}).ShortTag()
		explicit = n.ShortTag() != implicit
	}
	if !explicit {
		if tag == "!" || n.Style&quotedOrBlock != 0 {
			return n.Value, nil
		}
		return resolvePlain(n.Value), nil
	}
	switch n.ShortTag() {
	case "!!str":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		if v, ok := resolvePlain(n.Value).(bool); ok {
			return v, nil
		}
	case "!!int", "!!float":
		if v, ok := resolvePlain(n.Value).(float64); ok {
			return v, nil
		}
	default:
		return nil, yamlErrorf(n, "unsupported tag %s", n.Tag)
	}
	return nil, yamlErrorf(n, "value %q does not match its tag %s", n.Value, n.Tag)
}

// resolvePlain reads an untagged plain scalar with the YAML 1.2 core schema.
func resolvePlain(s string) any {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil
	case "true", "True", "TRUE":
		return true
	case "false", "False", "FALSE":
		return false
	case ".nan", ".NaN", ".NAN":
		return math.NaN()
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return math.Inf(1)
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1)
	}
	b := []byte(s)
	if len(s) > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x') && resolvesAsNonString(b) {
		base := 8
		if s[1] == 'x' {
			base = 16
		}
		if u, err := strconv.ParseUint(s[2:], base, 64); err == nil {
			return float64(u)
		}
		i, _ := new(big.Int).SetString(s[2:], base)
		f, _ := new(big.Float).SetInt(i).Float64()
		return f
	}
	if isCoreNumber(b) {
		f, err := strconv.ParseFloat(strings.TrimPrefix(s, "+"), 64)
		if err == nil || errors.Is(err, strconv.ErrRange) {
			return f
		}
	}
	return s
}
