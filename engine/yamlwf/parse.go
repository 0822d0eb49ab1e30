package yamlwf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/roleschema"
)

// FallbackKey is the graph key taken when no status matches.
const FallbackKey = "FALLBACK"

// Error is a problem in a YAML workflow, located by its key path
// ("roles.reviewer.agent") and, when known, its line.
type Error struct {
	Path string // dotted key path; "" for the document itself
	Line int    // 1-based; 0 when unknown
	Msg  string
}

// Error formats the problem as "line N: path: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func errAt(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Definition is a parsed and validated YAML workflow.
type Definition struct {
	Description string
	// Roles in declaration order.
	Roles []Role
	// Routes in declaration order, one per graph key.
	Routes []Route
}

// Role is one role of a workflow.
type Role struct {
	Name        string
	Description string
	Prompt      string
	// Agent is the resolved spec (a named agent, an inline one or the
	// default), already validated.
	Agent agents.Spec
	// Output is the JSON Schema of the role's meta, in written key order.
	Output canonyaml.Map
	// outputJSON is Output as JSON text, what agents receive as Call.Schema.
	outputJSON []byte
	schema     *jsonschema.Schema
}

// Route is the graph entry of one role (or __start__).
type Route struct {
	From string
	// Next is the unconditional next role; "" when the route is keyed.
	Next string
	// Cases map a meta.status value to the next role, in written order.
	Cases []Case
	// Fallback is the role taken when no case matches; "" when the entry
	// has no FALLBACK key (then the thread ends).
	Fallback string
}

// Case is one keyed transition.
type Case struct {
	Status string
	Next   string
}

var roleNameRule = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// agentNameRule keeps agent names plain identifiers: they are referenced by
// bare strings and shown in error messages.
var agentNameRule = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// maxInput bounds a workflow file: it is configuration, and every role
// schema is compiled when it is added.
const maxInput = 4 << 20

// Parse reads and validates a YAML workflow. Malformed YAML gives yaml.v3's
// error (with its line); every other problem an *Error naming the key path.
func Parse(data []byte) (*Definition, error) {
	if len(data) > maxInput {
		return nil, &Error{Msg: fmt.Sprintf("workflow file is larger than %d bytes", maxInput)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{Msg: "empty workflow file"}
	}
	// A second document would be ignored by everything that reads the file.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errAt(&extra, "", "a workflow file holds one YAML document; found another after ---")
	}
	// A first pass over the whole document rejects what no part of it may
	// hold (aliases that expand it too far, duplicate keys, custom tags,
	// recursive aliases) before the structural walk follows aliases freely
	// and every role's schema is converted and compiled. The expansion is
	// measured without expanding anything, before the conversion would.
	if err := canonyaml.CheckAliasExpansion(&doc); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	if _, err := canonyaml.FromYAML(&doc); err != nil {
		return nil, &Error{Msg: strings.TrimPrefix(err.Error(), "canonyaml: ")}
	}
	p := parser{}
	return p.document(doc.Content[0])
}

type parser struct {
	agentNames []string
	agentSpecs map[string]agents.Spec
}

// deref follows aliases: the first pass has ruled out cycles.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

type field struct {
	key   *yaml.Node
	value *yaml.Node
}

// mapping returns the pairs of a mapping node, rejecting keys not in allowed
// (nil allows any key).
func mapping(n *yaml.Node, path, what string, allowed []string) ([]field, error) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n, path, "must be a mapping (%s), got %s", what, describeNode(n))
	}
	out := make([]field, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(k, path, "keys must be plain strings")
		}
		if allowed != nil && !contains(allowed, k.Value) {
			return nil, errAt(k, join(path, k.Value), "unknown key (allowed: %s)", strings.Join(sortedCopy(allowed), ", "))
		}
		out = append(out, field{k, v})
	}
	return out, nil
}

func (p *parser) document(root *yaml.Node) (*Definition, error) {
	fields, err := mapping(root, "", "the workflow", []string{"version", "description", "agents", "roles", "agent", "graph"})
	if err != nil {
		return nil, err
	}
	got := map[string]*yaml.Node{}
	for _, f := range fields {
		got[f.key.Value] = f.value
	}
	for _, k := range []string{"version", "description", "roles", "graph"} {
		if got[k] == nil {
			return nil, errAt(root, k, "required")
		}
	}
	if v := got["version"]; v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Value != "1" {
		return nil, errAt(v, "version", "must be 1, got %s", describeNode(v))
	}
	def := &Definition{}
	if def.Description, err = requiredString(got["description"], "description"); err != nil {
		return nil, err
	}
	p.agentSpecs = map[string]agents.Spec{}
	if n := got["agents"]; n != nil && !isNull(n) {
		if err := p.agents(n); err != nil {
			return nil, err
		}
	}
	var defaultAgent *agents.Spec
	if n := got["agent"]; n != nil && !isNull(n) {
		s, err := p.agentRef(n, "agent")
		if err != nil {
			return nil, err
		}
		defaultAgent = &s
	}
	if def.Roles, err = p.roles(got["roles"], defaultAgent); err != nil {
		return nil, err
	}
	if def.Routes, err = p.graph(got["graph"], def.Roles); err != nil {
		return nil, err
	}
	if err := checkReachable(def, fields); err != nil {
		return nil, err
	}
	return def, nil
}

func (p *parser) agents(n *yaml.Node) error {
	fields, err := mapping(n, "agents", "agent name → agent spec", nil)
	if err != nil {
		return err
	}
	for _, f := range fields {
		name := f.key.Value
		path := join("agents", name)
		if !agentNameRule.MatchString(name) {
			return errAt(f.key, path, "invalid agent name: start with a letter; use letters, digits, '-' and '_'")
		}
		if f.value.Kind != yaml.MappingNode {
			return errAt(f.value, path, "must be an agent spec mapping {type: ..., ...}, got %s", describeNode(f.value))
		}
		s, err := agentSpec(f.value, path)
		if err != nil {
			return err
		}
		p.agentNames = append(p.agentNames, name)
		p.agentSpecs[name] = s
	}
	return nil
}

// agentRef reads a role's (or the default) agent: a name from agents or an
// inline spec.
func (p *parser) agentRef(n *yaml.Node, path string) (agents.Spec, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" {
			return agents.Spec{}, errAt(n, path, "must be an agent name or an inline agent spec, got %s", describeNode(n))
		}
		s, ok := p.agentSpecs[n.Value]
		if !ok {
			defined := "none"
			if len(p.agentNames) > 0 {
				defined = strings.Join(sortedCopy(p.agentNames), ", ")
			}
			return agents.Spec{}, errAt(n, path, "unknown agent %q (defined: %s)", n.Value, defined)
		}
		return s, nil
	case yaml.MappingNode:
		return agentSpec(n, path)
	}
	return agents.Spec{}, errAt(n, path, "must be an agent name or an inline agent spec, got %s", describeNode(n))
}

// specKeys are the YAML keys of agents.Spec, taken from its JSON names so
// the two cannot drift apart.
var specKeys = func() []string {
	t := reflect.TypeOf(agents.Spec{})
	keys := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}()

// agentSpec decodes and validates an inline agent spec.
func agentSpec(n *yaml.Node, path string) (agents.Spec, error) {
	if _, err := mapping(n, path, "an agent spec", specKeys); err != nil {
		return agents.Spec{}, err
	}
	v, err := canonyaml.FromYAML(n)
	if err != nil {
		return agents.Spec{}, errAt(n, path, "%s", strings.TrimPrefix(err.Error(), "canonyaml: "))
	}
	data, err := v.(canonyaml.Map).MarshalJSON()
	if err != nil {
		return agents.Spec{}, errAt(n, path, "%v", err)
	}
	var s agents.Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return agents.Spec{}, errAt(n, join(path, te.Field), "must be %s, got a %s", jsonKind(te.Type), te.Value)
		}
		return agents.Spec{}, errAt(n, path, "%v", err)
	}
	// A relative workspace is relative to the YAML file and made absolute
	// by ResolvePaths when the workflow is registered; everything else
	// about the spec is checked as it will run.
	check := s
	if check.Workspace != "" && !filepath.IsAbs(check.Workspace) {
		check.Workspace = filepath.Join(string(filepath.Separator), check.Workspace)
	}
	if err := check.Validate(); err != nil {
		return agents.Spec{}, errAt(n, path, "%s", strings.TrimPrefix(err.Error(), "agent: "))
	}
	return s, nil
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a mapping"
	}
	return "a " + t.String()
}

func (p *parser) roles(n *yaml.Node, defaultAgent *agents.Spec) ([]Role, error) {
	fields, err := mapping(n, "roles", "role name → role", nil)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, errAt(n, "roles", "at least one role is required")
	}
	roles := make([]Role, 0, len(fields))
	for _, f := range fields {
		r, err := p.role(f, defaultAgent)
		if err != nil {
			return nil, err
		}
		roles = append(roles, r)
	}
	return roles, nil
}

func (p *parser) role(f field, defaultAgent *agents.Spec) (Role, error) {
	name := f.key.Value
	path := join("roles", name)
	if name == node.RoleStart || name == node.RoleEnd {
		return Role{}, errAt(f.key, path, "%s is reserved; it cannot be a role", name)
	}
	if !roleNameRule.MatchString(name) {
		return Role{}, errAt(f.key, path, `invalid role name: use lowercase letters, digits and hyphens, e.g. "reviewer"`)
	}
	fields, err := mapping(f.value, path, "description, prompt, agent, output", []string{"description", "prompt", "agent", "output"})
	if err != nil {
		return Role{}, err
	}
	got := map[string]*yaml.Node{}
	for _, rf := range fields {
		got[rf.key.Value] = rf.value
	}
	r := Role{Name: name}
	for _, k := range []string{"description", "prompt"} {
		if got[k] == nil {
			return Role{}, errAt(f.value, join(path, k), "required")
		}
	}
	if r.Description, err = requiredString(got["description"], join(path, "description")); err != nil {
		return Role{}, err
	}
	if r.Prompt, err = requiredString(got["prompt"], join(path, "prompt")); err != nil {
		return Role{}, err
	}
	switch a := got["agent"]; {
	case a != nil && !isNull(a):
		if r.Agent, err = p.agentRef(a, join(path, "agent")); err != nil {
			return Role{}, err
		}
	case defaultAgent != nil:
		r.Agent = *defaultAgent
	default:
		return Role{}, errAt(f.value, join(path, "agent"), "required (there is no top-level agent default)")
	}
	if err := r.compileOutput(got["output"], join(path, "output")); err != nil {
		return Role{}, err
	}
	return r, nil
}

// compileOutput reads the role's output schema (default {type: object}) and
// compiles it, so a broken schema is refused when the workflow is added,
// not when the role first runs.
func (r *Role) compileOutput(n *yaml.Node, path string) error {
	r.Output = canonyaml.Map{{Key: "type", Value: "object"}}
	if n != nil && !isNull(n) {
		if n.Kind != yaml.MappingNode {
			return errAt(n, path, "must be a JSON Schema mapping, got %s", describeNode(n))
		}
		if err := checkKeywords(n, path, 0); err != nil {
			return err
		}
		v, err := canonyaml.FromYAML(n)
		if err != nil {
			return errAt(n, path, "%s", strings.TrimPrefix(err.Error(), "canonyaml: "))
		}
		r.Output = v.(canonyaml.Map)
		if t, ok := r.Output.Get("type"); ok && t != "object" {
			return errAt(n, join(path, "type"), "must be object: a role's meta is a JSON object")
		}
	}
	full, err := r.Output.MarshalJSON()
	if err != nil {
		return errAt(n, path, "%v", err)
	}
	sch, err := roleschema.Compile(full)
	if err != nil {
		return errAt(n, path, "invalid JSON Schema: %s", roleschema.ErrorText(err))
	}
	// $schema picks the draft to compile with; like the runtime's
	// buildDescriptor, agents and the descriptor get the schema without it.
	stripped := make(canonyaml.Map, 0, len(r.Output))
	for _, p := range r.Output {
		if p.Key != "$schema" {
			stripped = append(stripped, p)
		}
	}
	if r.outputJSON, err = stripped.MarshalJSON(); err != nil {
		return errAt(n, path, "%v", err)
	}
	r.Output, r.schema = stripped, sch
	return nil
}

func (p *parser) graph(n *yaml.Node, roles []Role) ([]Route, error) {
	fields, err := mapping(n, "graph", "role → next role, or role → {status: next role}", nil)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	var names []string
	for _, r := range roles {
		known[r.Name] = true
		names = append(names, r.Name)
	}
	unknown := func(n *yaml.Node, path, name string) error {
		return errAt(n, path, "unknown role %q (roles: %s)", name, strings.Join(names, ", "))
	}
	target := func(n *yaml.Node, path string) (string, error) {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return "", errAt(n, path, "must be a role name or %s, got %s", node.RoleEnd, describeNode(n))
		}
		switch {
		case n.Value == node.RoleEnd || known[n.Value]:
			return n.Value, nil
		case n.Value == node.RoleStart:
			return "", errAt(n, path, "%s cannot be a target", node.RoleStart)
		}
		return "", unknown(n, path, n.Value)
	}
	var routes []Route
	hasStart := false
	for _, f := range fields {
		from := f.key.Value
		path := join("graph", from)
		switch {
		case from == node.RoleStart:
			hasStart = true
		case from == node.RoleEnd:
			return nil, errAt(f.key, path, "%s ends the thread; it cannot have successors", node.RoleEnd)
		case !known[from]:
			return nil, unknown(f.key, join("graph", from), from)
		}
		route := Route{From: from}
		switch f.value.Kind {
		case yaml.ScalarNode:
			if route.Next, err = target(f.value, path); err != nil {
				return nil, err
			}
		case yaml.MappingNode:
			cases, err := mapping(f.value, path, "status → next role", nil)
			if err != nil {
				return nil, err
			}
			if len(cases) == 0 {
				return nil, errAt(f.value, path, "empty mapping: name the next role, or map statuses to roles")
			}
			for _, c := range cases {
				to, err := target(c.value, join(path, c.key.Value))
				if err != nil {
					return nil, err
				}
				if c.key.Value == FallbackKey {
					route.Fallback = to
					continue
				}
				if c.key.Value == "" {
					return nil, errAt(c.key, path, "a status key must not be empty")
				}
				route.Cases = append(route.Cases, Case{Status: c.key.Value, Next: to})
			}
		default:
			return nil, errAt(f.value, path, "must be a role name, %s, or a mapping status → role; got %s", node.RoleEnd, describeNode(f.value))
		}
		routes = append(routes, route)
	}
	if !hasStart {
		return nil, errAt(n, "graph", "no entry for %s", node.RoleStart)
	}
	return routes, nil
}

// checkReachable refuses roles no path from __start__ leads to: they are
// almost always a misspelt graph entry.
func checkReachable(def *Definition, fields []field) error {
	next := map[string][]string{}
	for _, r := range def.Routes {
		next[r.From] = append(next[r.From], r.targets()...)
	}
	seen := map[string]bool{node.RoleStart: true}
	queue := []string{node.RoleStart}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, to := range next[cur] {
			if !seen[to] {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	var rolesNode *yaml.Node
	for _, f := range fields {
		if f.key.Value == "roles" {
			rolesNode = f.value
		}
	}
	for i, r := range def.Roles {
		if !seen[r.Name] {
			var at *yaml.Node
			if rolesNode != nil && 2*i < len(rolesNode.Content) {
				at = rolesNode.Content[2*i]
			}
			return errAt(at, join("roles", r.Name), "unreachable from %s: no graph entry leads to it", node.RoleStart)
		}
	}
	return nil
}

// targets lists where a route may go, in declaration order (FALLBACK last).
func (r Route) targets() []string {
	if r.Next != "" {
		return []string{r.Next}
	}
	out := make([]string, 0, len(r.Cases)+1)
	for _, c := range r.Cases {
		out = append(out, c.Next)
	}
	if r.Fallback != "" {
		out = append(out, r.Fallback)
	}
	return out
}

func requiredString(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", errAt(n, path, "must be a string, got %s", describeNode(n))
	}
	if strings.TrimSpace(n.Value) == "" {
		return "", errAt(n, path, "must not be empty")
	}
	return n.Value, nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!null":
			return "null"
		case "!!bool":
			return "the boolean " + n.Value
		case "!!int", "!!float":
			return "the number " + n.Value
		}
		return fmt.Sprintf("%s %q", n.Tag, n.Value)
	}
	return "an unsupported YAML node"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedCopy(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	return out
}
