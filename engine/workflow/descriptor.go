package workflow

import "github.com/uncaged/workflow/engine/canonyaml"

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
