// Package roleschema compiles the JSON Schemas roles declare for their
// meta — from a bundle, a YAML workflow or a model's output tool — the one
// way all of them are compiled: self-contained, so a schema's $ref can
// never make the engine read a file or the network.
package roleschema

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// location names the schema inside its own compiler; refs to it resolve
// within the document.
const location = "urn:uncaged:role-schema"

// Compile parses data as JSON and compiles it as a JSON Schema. Errors are
// the library's, for callers to prefix with what the schema belongs to.
func Compile(data []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	// An empty scheme table: no file://, no http(s):// loading.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(location, doc); err != nil {
		return nil, err
	}
	return c.Compile(location)
}

// maxErrorText bounds an ErrorText: a schema error quoted into a model's
// correction round, a thread's summary or an add-time message.
const maxErrorText = 2000

// ErrorText flattens a schema compilation or validation error to one line
// ("; " between the library's lines, without its "jsonschema validation
// failed with ..." header), at most maxErrorText bytes, cut on a rune
// boundary.
func ErrorText(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) > 1 && strings.HasPrefix(lines[0], "jsonschema validation failed") {
		lines = lines[1:]
	}
	var parts []string
	for _, l := range lines {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- ")); l != "" {
			parts = append(parts, l)
		}
	}
	s := strings.Join(parts, "; ")
	if len(s) <= maxErrorText {
		return s
	}
	n := maxErrorText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
