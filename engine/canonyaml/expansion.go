package canonyaml

import (
	"bytes"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// MaxAliasExpansion bounds how much YAML aliases may add to a document:
// the size of the document with every alias replaced by what it refers to,
// minus its size as written, must stay at or below it. Size counts the
// bytes of every scalar plus expansionValueCost for every value, so many
// small aliased values weigh what they cost once decoded, not nothing.
//
// Aliases make a document's decoded form exponentially larger than its
// text (a 32 KB workflow of 8-way aliases over 4,000-character strings
// expands to gigabytes), and everything downstream (value trees, JSON,
// compiled schemas) materialises the expanded form. The value count alone
// (at most 4M values, as in gopkg.in/yaml.v3) does not bound bytes. 16 MiB
// is hundreds of times what legitimate reuse adds to a workflow, registry
// or node (a few shared agent specs or schema fragments: kilobytes), and
// small enough that decoding the worst accepted document stays within a few
// hundred megabytes. A document without aliases adds nothing and is never
// refused, whatever its size.
const MaxAliasExpansion = 16 << 20

// expansionValueCost is what each value counts for besides its text: less
// than any decoded value costs (an interface and a string header alone take
// 32 bytes), so the limit errs on the side of accepting.
const expansionValueCost = 16

// ErrAliasExpansion is wrapped by the error for a document whose aliases
// expand it by more than MaxAliasExpansion bytes.
var ErrAliasExpansion = errors.New("YAML aliases expand the document too far")

// ParseYAML parses data into a node tree as yaml.Unmarshal does (the first
// document; an empty input gives a node of kind 0) and refuses a document
// whose aliases would expand it by more than MaxAliasExpansion bytes. It is
// the way to read YAML a user or another program supplies: the check costs
// nothing for text without a '*', which is every document without aliases.
func ParseYAML(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if bytes.IndexByte(data, '*') >= 0 {
		if err := CheckAliasExpansion(&doc); err != nil {
			return nil, err
		}
	}
	return &doc, nil
}

// CheckAliasExpansion returns an error wrapping ErrAliasExpansion when
// replacing every alias under n by its target would add more than
// MaxAliasExpansion bytes (see there), and an error for a recursive alias.
// It never expands anything: each alias target's expanded size is computed
// once and reused, so the check takes time linear in the number of nodes.
func CheckAliasExpansion(n *yaml.Node) error {
	if n == nil {
		return nil
	}
	m := expansionMeter{sizes: map[*yaml.Node]int64{}}
	expanded, err := m.size(n)
	if err != nil || !m.aliases {
		return err
	}
	if expanded-m.written > MaxAliasExpansion {
		at := ""
		if m.first.Line > 0 {
			at = fmt.Sprintf(" (its first alias: *%s at line %d)", m.first.Value, m.first.Line)
		}
		return fmt.Errorf("%w: it expands by more than %d bytes (16 MiB, the limit) through its aliases%s; write the repeated parts out or reuse them less",
			ErrAliasExpansion, MaxAliasExpansion, at)
	}
	return nil
}

// sizeCap keeps sums of expanded sizes from overflowing; anything at the
// cap is far over the limit.
const sizeCap = 1 << 62

func addCapped(a, b int64) int64 {
	if a >= sizeCap-b {
		return sizeCap
	}
	return a + b
}

// expansionMeter measures a node tree twice over in one walk: as written
// (each node once) and as expanded (each alias as its target).
type expansionMeter struct {
	// sizes holds the expanded size of every alias target measured so
	// far; -1 marks one being measured, which an alias inside it would
	// make recursive.
	sizes   map[*yaml.Node]int64
	written int64
	aliases bool
	first   *yaml.Node // the first alias met, for the error
}

func (m *expansionMeter) size(n *yaml.Node) (int64, error) {
	if n.Kind == yaml.AliasNode {
		m.written += expansionValueCost
		if !m.aliases {
			m.aliases, m.first = true, n
		}
		t := n.Alias
		if t == nil {
			return expansionValueCost, nil
		}
		if s, ok := m.sizes[t]; ok {
			if s < 0 {
				if n.Line > 0 {
					return 0, fmt.Errorf("line %d: recursive alias *%s", n.Line, n.Value)
				}
				return 0, fmt.Errorf("recursive alias *%s", n.Value)
			}
			return s, nil
		}
		// A target outside the tree being checked (when n is a subtree
		// whose aliases point elsewhere): measured, not counted as written.
		w := m.written
		s, err := m.size(t)
		m.written = w
		return s, err
	}
	anchored := n.Anchor != ""
	if anchored {
		m.sizes[n] = -1
	}
	total := int64(expansionValueCost + len(n.Value))
	m.written += total
	for _, c := range n.Content {
		s, err := m.size(c)
		if err != nil {
			return 0, err
		}
		total = addCapped(total, s)
	}
	if anchored {
		m.sizes[n] = total
	}
	return total, nil
}
