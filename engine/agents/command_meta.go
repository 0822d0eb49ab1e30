package agents

// Turning a command agent's output into the role's meta: the output
// itself when it is schema-valid JSON, else a JSON object found in it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/roleschema"
)

// compileSchema compiles the role's JSON Schema; nil accepts any object.
func compileSchema(schema json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("agent: the role's schema is not JSON: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("agent: the role's schema must be a JSON Schema object")
	}
	s, err := roleschema.Compile(schema)
	if err != nil {
		return nil, fmt.Errorf("agent: the role's schema: %w", err)
	}
	return s, nil
}

// metaFromJSON parses text as a JSON object and validates it.
func metaFromJSON(text string, schema *jsonschema.Schema) (canonyaml.Map, error) {
	if text == "" {
		return nil, errors.New("the output is empty")
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("the output is not JSON: %v", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("the output is JSON but not an object")
	}
	if schema != nil {
		if err := schema.Validate(doc); err != nil {
			return nil, errors.New(roleschema.ErrorText(err))
		}
	}
	tree, err := canonyaml.FromJSON([]byte(text))
	if err != nil {
		return nil, err
	}
	m, ok := tree.(canonyaml.Map)
	if !ok {
		return nil, errors.New("the output is JSON but not an object")
	}
	return m, nil
}

// maxTrailingTries bounds the search for a JSON object at the end of a
// long, brace-heavy output; each try parses the rest of the output.
const maxTrailingTries = 64

// metaInOutput finds the role's meta in an agent's prose output: the whole
// output, a ```json fenced block (the last that fits), or a JSON object
// that ends the output and starts at the beginning of a line.
func metaInOutput(out string, schema *jsonschema.Schema) (canonyaml.Map, bool) {
	text := strings.TrimSpace(out)
	if m, err := metaFromJSON(text, schema); err == nil {
		return m, true
	}
	blocks := fencedJSONBlocks(text)
	for i := len(blocks) - 1; i >= 0; i-- {
		if m, err := metaFromJSON(blocks[i], schema); err == nil {
			return m, true
		}
	}
	if !strings.HasSuffix(text, "}") {
		return nil, false
	}
	tries := 0
	for end := len(text); end > 0 && tries < maxTrailingTries; {
		i := strings.LastIndex(text[:end], "\n{")
		if i < 0 {
			break
		}
		tries++
		if m, err := metaFromJSON(text[i+1:], schema); err == nil {
			return m, true
		}
		end = i
	}
	return nil, false
}

// fencedJSONBlocks returns the bodies of ```json fenced blocks, in order.
func fencedJSONBlocks(text string) []string {
	var out []string
	rest := text
	for {
		i := strings.Index(rest, "```json")
		if i < 0 {
			return out
		}
		body := rest[i+len("```json"):]
		nl := strings.IndexByte(body, '\n')
		if nl < 0 {
			return out
		}
		body = body[nl+1:]
		j := strings.Index(body, "```")
		if j < 0 {
			return out
		}
		out = append(out, strings.TrimSpace(body[:j]))
		rest = body[j+3:]
	}
}
