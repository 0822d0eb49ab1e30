package yamlwf

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// schemaKeywords are the keywords of JSON Schema drafts 4 to 2020-12, plus
// casRef. JSON Schema itself ignores unknown keywords, so a misspelt
// "requierd" would silently stop checking anything; a role's output schema
// may use only these, or extension keywords starting with "x-".
var schemaKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`
		$schema $id $ref $anchor $dynamicRef $dynamicAnchor $defs $comment $vocabulary
		$recursiveRef $recursiveAnchor definitions id
		allOf anyOf oneOf not if then else dependentSchemas prefixItems items contains
		properties patternProperties additionalProperties propertyNames additionalItems
		dependencies unevaluatedItems unevaluatedProperties
		type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum
		maxLength minLength pattern maxItems minItems uniqueItems maxContains minContains
		maxProperties minProperties required dependentRequired
		title description default deprecated readOnly writeOnly examples format
		contentEncoding contentMediaType contentSchema
		casRef`) {
		m[k] = true
	}
	return m
}()

// Where subschemas sit: one schema, a list of schemas, or a map of them.
var (
	schemaValued = map[string]bool{"not": true, "if": true, "then": true, "else": true, "contains": true,
		"additionalProperties": true, "propertyNames": true, "additionalItems": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true, "items": true}
	schemaListValued = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true}
	schemaMapValued  = map[string]bool{"properties": true, "patternProperties": true, "$defs": true,
		"definitions": true, "dependentSchemas": true, "dependencies": true}
)

// checkKeywords reports the first unknown keyword in the schema at n.
// Values that are data (enum, const, default, examples) are not walked.
func checkKeywords(n *yaml.Node, path string, depth int) *Error {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode || depth > maxSchemaDepth {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		key := k.Value
		at := join(path, key)
		if !schemaKeywords[key] && !strings.HasPrefix(key, "x-") {
			return errAt(k, at, `unknown JSON Schema keyword (a typo? extension keywords start with "x-")`)
		}
		switch {
		case schemaValued[key] && v.Kind == yaml.MappingNode:
			if err := checkKeywords(v, at, depth+1); err != nil {
				return err
			}
		case schemaListValued[key] && v.Kind == yaml.SequenceNode:
			for _, item := range v.Content {
				if err := checkKeywords(item, at, depth+1); err != nil {
					return err
				}
			}
		case schemaMapValued[key] && v.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				if err := checkKeywords(v.Content[j+1], join(at, deref(v.Content[j]).Value), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
