package workflow

import (
	"errors"
	"fmt"
	"sort"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// Descriptor is a workflow's static description: its roles and the routing
// graph between them, stored beside a bundle as bundles/<hash>.yaml.
type Descriptor struct {
	Description string
	Roles       []RoleDescriptor // in declaration order
	Graph       Graph
}

// RoleDescriptor describes one role.
type RoleDescriptor struct {
	Name         string
	Description  string
	SystemPrompt string
	Schema       canonyaml.Map // JSON Schema of the role's meta
}

// Graph is the routing table as edges.
type Graph struct {
	Edges []Edge
}

// Edge is one transition: from a role (or __start__) to a role (or
// __end__) under a named condition or "FALLBACK".
type Edge struct {
	From                 string
	To                   string
	Condition            string
	ConditionDescription *string // nil for FALLBACK
}

// ValidateDescriptor checks a decoded descriptor the way the original's
// validateWorkflowDescriptor does and returns it typed. v is a JSON-like
// value tree: canonyaml.Map (or map[string]any, read in sorted key order),
// []any, string, float64, bool and nil, as canonyaml.FromJSON and
// canonyaml.FromYAML produce. Any other Go value counts as a JavaScript
// value that is neither an object nor a string (a function, say), so
// callers converting live JavaScript values can pass such placeholders and
// get the original's error for them.
//
// The error texts are the original's, word for word, because users and
// tests match on them: the first problem wins, roles are checked in
// declaration order before the graph, a missing or non-string systemPrompt
// reads as "", and a missing conditionDescription reads as null.
func ValidateDescriptor(v any) (Descriptor, error) {
	root, ok := asObject(v)
	if !ok {
		return Descriptor{}, errors.New("descriptor must be a non-array object")
	}
	description, ok := getString(root, "description")
	if !ok {
		return Descriptor{}, errors.New("descriptor.description must be a string")
	}
	rolesRaw, _ := root.Get("roles")
	roles, ok := asObject(rolesRaw)
	if !ok {
		return Descriptor{}, errors.New("descriptor.roles must be a non-array object")
	}
	d := Descriptor{Description: description, Roles: make([]RoleDescriptor, 0, len(roles))}
	for _, p := range roles {
		spec, ok := asObject(p.Value)
		if !ok {
			return Descriptor{}, fmt.Errorf("descriptor.roles.%s must be a non-array object", p.Key)
		}
		roleDesc, ok := getString(spec, "description")
		if !ok {
			return Descriptor{}, fmt.Errorf("descriptor.roles.%s.description must be a string", p.Key)
		}
		schemaRaw, _ := spec.Get("schema")
		schema, ok := asObject(schemaRaw)
		if !ok {
			return Descriptor{}, fmt.Errorf("descriptor.roles.%s.schema must be a non-array object", p.Key)
		}
		systemPrompt, _ := getString(spec, "systemPrompt")
		d.Roles = append(d.Roles, RoleDescriptor{
			Name:         p.Key,
			Description:  roleDesc,
			SystemPrompt: systemPrompt,
			Schema:       schema,
		})
	}
	graph, err := validateGraph(root)
	if err != nil {
		return Descriptor{}, err
	}
	d.Graph = graph
	return d, nil
}

func validateGraph(root canonyaml.Map) (Graph, error) {
	graphRaw, _ := root.Get("graph")
	graph, ok := asObject(graphRaw)
	if !ok {
		return Graph{}, errors.New("descriptor.graph must be a non-array object")
	}
	edgesRaw, _ := graph.Get("edges")
	items, ok := edgesRaw.([]any)
	if !ok {
		return Graph{}, errors.New("descriptor.graph.edges must be an array")
	}
	edges := make([]Edge, 0, len(items))
	for i, item := range items {
		e, ok := asObject(item)
		if !ok {
			return Graph{}, fmt.Errorf("descriptor.graph.edges[%d] must be a non-array object", i)
		}
		var edge Edge
		for _, f := range []struct {
			name string
			dst  *string
		}{{"from", &edge.From}, {"to", &edge.To}, {"condition", &edge.Condition}} {
			s, ok := getString(e, f.name)
			if !ok {
				return Graph{}, fmt.Errorf("descriptor.graph.edges[%d].%s must be a string", i, f.name)
			}
			*f.dst = s
		}
		switch cd, _ := e.Get("conditionDescription"); cd := cd.(type) {
		case nil:
		case string:
			edge.ConditionDescription = &cd
		default:
			return Graph{}, fmt.Errorf("descriptor.graph.edges[%d].conditionDescription must be a string or null", i)
		}
		edges = append(edges, edge)
	}
	return Graph{Edges: edges}, nil
}

// asObject reports whether v is a JSON object, and returns it ordered.
func asObject(v any) (canonyaml.Map, bool) {
	switch m := v.(type) {
	case canonyaml.Map:
		if m == nil {
			return canonyaml.Map{}, true
		}
		return m, true
	case map[string]any:
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(canonyaml.Map, 0, len(m))
		for _, k := range keys {
			out = append(out, canonyaml.Pair{Key: k, Value: m[k]})
		}
		return out, true
	}
	return nil, false
}

func getString(m canonyaml.Map, key string) (string, bool) {
	v, _ := m.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Tree returns the descriptor as the ordered value tree the original
// serializes: {description, roles: {<name>: {description, systemPrompt,
// schema}}, graph: {edges: [{from, to, condition, conditionDescription}]}}.
func (d Descriptor) Tree() canonyaml.Map {
	roles := make(canonyaml.Map, 0, len(d.Roles))
	for _, r := range d.Roles {
		schema := r.Schema
		if schema == nil {
			schema = canonyaml.Map{}
		}
		roles = append(roles, canonyaml.Pair{Key: r.Name, Value: canonyaml.Map{
			{Key: "description", Value: r.Description},
			{Key: "systemPrompt", Value: r.SystemPrompt},
			{Key: "schema", Value: schema},
		}})
	}
	edges := make([]any, 0, len(d.Graph.Edges))
	for _, e := range d.Graph.Edges {
		var cd any
		if e.ConditionDescription != nil {
			cd = *e.ConditionDescription
		}
		edges = append(edges, canonyaml.Map{
			{Key: "from", Value: e.From},
			{Key: "to", Value: e.To},
			{Key: "condition", Value: e.Condition},
			{Key: "conditionDescription", Value: cd},
		})
	}
	return canonyaml.Map{
		{Key: "description", Value: d.Description},
		{Key: "roles", Value: roles},
		{Key: "graph", Value: canonyaml.Map{{Key: "edges", Value: edges}}},
	}
}

// MarshalYAML returns the sidecar bundles/<hash>.yaml exactly as the
// original writes it: yaml.stringify(descriptor, {indent: 2,
// defaultStringType: "QUOTE_DOUBLE"}). It is not a yaml.v3 Marshaler (that
// interface returns a value, not bytes): the bytes must be canonyaml's.
func (d Descriptor) MarshalYAML() ([]byte, error) {
	return canonyaml.MarshalWith(d.Tree(), canonyaml.Options{DefaultStringType: canonyaml.DoubleQuoted})
}

// MarshalJSON encodes the descriptor in the shape the original's API
// serves: the same tree as the sidecar, compact, keys in order.
func (d Descriptor) MarshalJSON() ([]byte, error) {
	return d.Tree().MarshalJSON()
}

// UnmarshalJSON decodes and validates a descriptor (see ValidateDescriptor).
func (d *Descriptor) UnmarshalJSON(data []byte) error {
	v, err := canonyaml.FromJSON(data)
	if err != nil {
		return err
	}
	got, err := ValidateDescriptor(v)
	if err != nil {
		return err
	}
	*d = got
	return nil
}

// ParseDescriptorYAML reads a bundles/<hash>.yaml sidecar (or any YAML or
// JSON document holding a descriptor) and validates it, as the original's
// connect API does when it serves a workflow's descriptor.
func ParseDescriptorYAML(data []byte) (Descriptor, error) {
	n, err := canonyaml.ParseYAML(data)
	if err != nil {
		return Descriptor{}, fmt.Errorf("descriptor YAML: %w", err)
	}
	if n.Kind == 0 { // an empty document holds no value at all
		return ValidateDescriptor(nil)
	}
	v, err := canonyaml.FromYAML(n)
	if err != nil {
		return Descriptor{}, fmt.Errorf("descriptor YAML: %w", err)
	}
	return ValidateDescriptor(v)
}
