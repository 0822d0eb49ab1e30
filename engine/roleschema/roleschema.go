// Package roleschema compiles the JSON Schemas roles declare for their
// meta — from a bundle, a YAML workflow or a model's output tool — the one
// way all of them are compiled: self-contained, so a schema's $ref can
// never make the engine read a file or the network.
package roleschema

import (
	"bytes"

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
