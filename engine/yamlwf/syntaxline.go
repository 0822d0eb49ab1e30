package yamlwf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"

	"gopkg.in/yaml.v3"
)

// yaml.v3 reports some syntax errors near where the enclosing block starts
// rather than where the problem is: an indentation slip on line 8 inside a
// mapping whose first key is on line 5 is "yaml: line 4: did not find
// expected key". The line of the problem is where the parser first fails,
// so syntaxError finds it by parsing ever longer beginnings of the file:
// the shortest one that fails with the same error ends on that line.

// yamlLineError matches yaml.v3's "yaml: line N: message".
var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeAll decodes every document of data and returns the first error
// (nil at the end of the input).
func decodeAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// syntaxError returns err, a syntax error yaml.v3 found in data, with the
// line where the parse actually fails when yaml.v3 named an earlier one
// (for an error found while parsing a block, it names the line before
// the block's first).
func syntaxError(data []byte, err error) error {
	m := yamlLineError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	// Line ends, so that lines[:k] is the file's first k lines.
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	same := func(k int) bool {
		e := decodeAll(data[:ends[k-1]])
		return e != nil && e.Error() == err.Error()
	}
	// The first k lines fail the same way from the problem's line on, and
	// not before it (a beginning that stops earlier has nothing wrong
	// with it, or fails some other way: cut inside a flow collection).
	k := 1 + sort.Search(len(ends), func(i int) bool { return same(i + 1) })
	if k > len(ends) || k <= reported || !same(k) {
		return err
	}
	return fmt.Errorf("yaml: line %d: %s", k, m[2])
}
