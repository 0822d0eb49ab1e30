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
	"slices"
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

func errAt(n *yaml.Node, path, format string, args ...any) *Error {
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
	// Warnings are what may still go wrong at run time that Parse cannot
	// rule out, such as route keys it cannot check against a status enum.
	Warnings []*Error
}

// Role is one role of a workflow.
type Role struct {
	Name        string
	Description string
	Prompt      string
	// Agent is the resolved spec (a named agent, an inline one or the
	// default), already validated.
	Agent agents.Spec
	// AgentName is the name under agents: the role's agent refers to
	// (directly or through the default); "" for an inline spec.
	AgentName string
	// Output is the JSON Schema of the role's meta, in written key order.
	Output canonyaml.Map
	// outputJSON is Output as JSON text, what agents receive as Call.Schema.
	outputJSON []byte
	schema     *jsonschema.Schema
	line       int // of the role's key, for problems found after the walk
}

// Line is the line of the role's key in the file (1-based), where
// problems found with the role after Parse are reported.
func (r Role) Line() int { return r.line }

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

// MaxInput bounds a workflow file: it is configuration, and every role
// schema is compiled when it is added.
const MaxInput = 4 << 20

// Parse reads and validates a YAML workflow. Malformed YAML gives yaml.v3's
// error with the line where it fails (syntaxError); every other problem is reported at once, as an
// *ErrorList of *Error values naming each key path, after the walk has gone
// through the whole file. What does not make the file wrong but may still
// fail a thread (route keys that cannot be checked) is in the Definition's
// Warnings.
func Parse(data []byte) (*Definition, error) {
	if len(data) > MaxInput {
		return nil, &Error{Msg: fmt.Sprintf("workflow file is larger than %d bytes", MaxInput)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(data, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{Msg: "empty workflow file"}
	}
	// A second document would be ignored by everything that reads the file.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(data, err)
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
	def := p.document(doc.Content[0])
	if err := p.errs.err(); err != nil {
		return nil, err
	}
	def.Warnings = p.warnings
	return def, nil
}

// parser walks a workflow, recording every problem and going on with the
// next part it can still check: a broken part is left out, and what refers
// to it is not reported again.
type parser struct {
	agentNames []string
	agentSpecs map[string]agents.Spec
	// brokenAgents are defined agents whose spec has problems: roles naming
	// them are not also told the agent is unknown.
	brokenAgents map[string]bool
	// defaultAgentName is the top-level agent's name when it refers to
	// one under agents:.
	defaultAgentName string
	errs             problems
	warnings         []*Error
}

func (p *parser) fail(e *Error) { p.errs.add(e) }

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

// mapping returns the pairs of a mapping node whose keys are in allowed
// (nil allows any key), reporting every other key. ok is false when n is
// not a mapping or a key was reported.
func (p *parser) mapping(n *yaml.Node, path, what string, allowed []string) (fields []field, ok bool) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.fail(errAt(n, path, "must be a mapping (%s), got %s", what, describeNode(n)))
		return nil, false
	}
	ok = true
	fields = make([]field, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.fail(errAt(k, path, "keys must be plain strings"))
			ok = false
			continue
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			p.fail(errAt(k, join(path, k.Value), "unknown key (allowed: %s)", strings.Join(sortedCopy(allowed), ", ")))
			ok = false
			continue
		}
		fields = append(fields, field{k, v})
	}
	return fields, ok
}

func (p *parser) document(root *yaml.Node) *Definition {
	fields, ok := p.mapping(root, "", "the workflow", []string{"version", "description", "agents", "roles", "agent", "graph"})
	if !ok && fields == nil {
		return nil
	}
	got := map[string]*yaml.Node{}
	for _, f := range fields {
		got[f.key.Value] = f.value
	}
	for _, k := range []string{"version", "description", "roles", "graph"} {
		if got[k] == nil {
			p.fail(errAt(root, k, "required"))
		}
	}
	if v := got["version"]; v != nil && (v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Value != "1") {
		p.fail(errAt(v, "version", "must be 1, got %s", describeNode(v)))
	}
	def := &Definition{}
	if n := got["description"]; n != nil {
		def.Description = p.requiredString(n, "description")
	}
	p.agentSpecs = map[string]agents.Spec{}
	p.brokenAgents = map[string]bool{}
	if n := got["agents"]; n != nil && !isNull(n) {
		p.agents(n)
	}
	// defaultAgent is nil when there is none; defaultBroken when there is
	// one with problems, so roles relying on it are not reported too.
	var defaultAgent *agents.Spec
	defaultBroken := false
	if n := got["agent"]; n != nil && !isNull(n) {
		if s, ok := p.agentRef(n, "agent"); ok {
			defaultAgent = &s
			p.defaultAgentName = agentRefName(n)
		} else {
			defaultBroken = true
		}
	}
	var declared []string
	if n := got["roles"]; n != nil {
		def.Roles, declared = p.roles(n, defaultAgent, defaultBroken)
	}
	if n := got["graph"]; n != nil {
		var graphOK bool
		def.Routes, graphOK = p.graph(n, def.Roles, declared)
		// Reachability over a graph with broken entries would only repeat
		// their problems as unreachable roles.
		if graphOK && len(declared) == len(def.Roles) {
			p.checkReachable(def)
		}
	}
	return def
}

func (p *parser) agents(n *yaml.Node) {
	fields, _ := p.mapping(n, "agents", "agent name → agent spec", nil)
	for _, f := range fields {
		name := f.key.Value
		path := join("agents", name)
		if !agentNameRule.MatchString(name) {
			p.fail(errAt(f.key, path, "invalid agent name: start with a letter; use letters, digits, '-' and '_'"))
			p.brokenAgents[name] = true
			continue
		}
		if f.value.Kind != yaml.MappingNode {
			p.fail(errAt(f.value, path, "must be an agent spec mapping {type: ..., ...}, got %s", describeNode(f.value)))
			p.brokenAgents[name] = true
			continue
		}
		s, ok := p.agentSpec(f.value, path)
		if !ok {
			p.brokenAgents[name] = true
			continue
		}
		p.agentNames = append(p.agentNames, name)
		p.agentSpecs[name] = s
	}
}

// agentRef reads a role's (or the default) agent: a name from agents or an
// inline spec. ok is false when a problem was reported, or the named agent
// has problems of its own.
func (p *parser) agentRef(n *yaml.Node, path string) (spec agents.Spec, ok bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" {
			break
		}
		if s, ok := p.agentSpecs[n.Value]; ok {
			return s, true
		}
		if p.brokenAgents[n.Value] {
			return agents.Spec{}, false
		}
		defined := "none"
		if len(p.agentNames) > 0 {
			defined = strings.Join(sortedCopy(p.agentNames), ", ")
		}
		p.fail(errAt(n, path, "unknown agent %q (defined: %s)", n.Value, defined))
		return agents.Spec{}, false
	case yaml.MappingNode:
		return p.agentSpec(n, path)
	}
	p.fail(errAt(n, path, "must be an agent name or an inline agent spec, got %s", describeNode(n)))
	return agents.Spec{}, false
}

// agentRefName is the agent name an agent field refers to (agentRef has
// resolved it), or "" for an inline spec.
func agentRefName(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
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
func (p *parser) agentSpec(n *yaml.Node, path string) (agents.Spec, bool) {
	if _, ok := p.mapping(n, path, "an agent spec", specKeys); !ok {
		return agents.Spec{}, false
	}
	s, err := decodeAgentSpec(n, path)
	if err != nil {
		p.fail(err)
		return agents.Spec{}, false
	}
	return s, true
}

func decodeAgentSpec(n *yaml.Node, path string) (agents.Spec, *Error) {
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

// roles returns the roles without problems, and the names of every role
// declared, so the graph can tell a broken role from an unknown one.
func (p *parser) roles(n *yaml.Node, defaultAgent *agents.Spec, defaultBroken bool) (roles []Role, declared []string) {
	if n = deref(n); n.Kind == yaml.MappingNode && len(n.Content) == 0 {
		p.fail(errAt(n, "roles", "at least one role is required"))
		return nil, nil
	}
	fields, _ := p.mapping(n, "roles", "role name → role", nil)
	for _, f := range fields {
		declared = append(declared, f.key.Value)
		if r, ok := p.role(f, defaultAgent, defaultBroken); ok {
			roles = append(roles, r)
		}
	}
	return roles, declared
}

func (p *parser) role(f field, defaultAgent *agents.Spec, defaultBroken bool) (Role, bool) {
	name := f.key.Value
	path := join("roles", name)
	before := len(p.errs.list) + p.errs.omitted
	if name == node.RoleStart || name == node.RoleEnd {
		p.fail(errAt(f.key, path, "%s is reserved; it cannot be a role", name))
	} else if !roleNameRule.MatchString(name) {
		p.fail(errAt(f.key, path, `invalid role name: use lowercase letters, digits and hyphens, e.g. "reviewer"`))
	}
	if f.value.Kind != yaml.MappingNode {
		p.fail(errAt(f.value, path, "must be a mapping (description, prompt, agent, output), got %s", describeNode(f.value)))
		return Role{}, false
	}
	fields, _ := p.mapping(f.value, path, "description, prompt, agent, output", []string{"description", "prompt", "agent", "output"})
	got := map[string]*yaml.Node{}
	for _, rf := range fields {
		got[rf.key.Value] = rf.value
	}
	r := Role{Name: name, line: f.key.Line}
	for _, k := range []string{"description", "prompt"} {
		if got[k] == nil {
			p.fail(errAt(f.value, join(path, k), "required"))
		}
	}
	if n := got["description"]; n != nil {
		r.Description = p.requiredString(n, join(path, "description"))
	}
	if n := got["prompt"]; n != nil {
		r.Prompt = p.requiredString(n, join(path, "prompt"))
	}
	switch a := got["agent"]; {
	case a != nil && !isNull(a):
		r.Agent, _ = p.agentRef(a, join(path, "agent"))
		r.AgentName = agentRefName(a)
	case defaultAgent != nil:
		r.Agent, r.AgentName = *defaultAgent, p.defaultAgentName
	case defaultBroken:
	default:
		p.fail(errAt(f.value, join(path, "agent"), "required (there is no top-level agent default)"))
	}
	if err := r.compileOutput(got["output"], join(path, "output")); err != nil {
		p.fail(err)
	}
	return r, len(p.errs.list)+p.errs.omitted == before
}

// compileOutput reads the role's output schema (default {type: object}) and
// compiles it, so a broken schema is refused when the workflow is added,
// not when the role first runs.
func (r *Role) compileOutput(n *yaml.Node, path string) *Error {
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

// graph reads the routes. roles are the roles without problems, declared
// every role name the file declares; ok is false when a problem in the
// graph itself was reported.
func (p *parser) graph(n *yaml.Node, roles []Role, declared []string) (routes []Route, ok bool) {
	before := len(p.errs.list) + p.errs.omitted
	fields, isMap := p.mapping(n, "graph", "role → next role, or role → {status: next role}", nil)
	if !isMap && fields == nil {
		return nil, false
	}
	valid := map[string]*Role{}
	for i := range roles {
		valid[roles[i].Name] = &roles[i]
	}
	unknown := func(n *yaml.Node, path, name string) {
		p.fail(errAt(n, path, "unknown role %q (roles: %s)", name, strings.Join(declared, ", ")))
	}
	target := func(n *yaml.Node, path string) (string, bool) {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			p.fail(errAt(n, path, "must be a role name or %s, got %s", node.RoleEnd, describeNode(n)))
			return "", false
		}
		switch {
		case n.Value == node.RoleEnd || slices.Contains(declared, n.Value):
			return n.Value, true
		case n.Value == node.RoleStart:
			p.fail(errAt(n, path, "%s cannot be a target", node.RoleStart))
			return "", false
		}
		unknown(n, path, n.Value)
		return "", false
	}
	hasStart := false
	for _, f := range fields {
		from := f.key.Value
		path := join("graph", from)
		switch {
		case from == node.RoleStart:
			hasStart = true
		case from == node.RoleEnd:
			p.fail(errAt(f.key, path, "%s ends the thread; it cannot have successors", node.RoleEnd))
			continue
		case !slices.Contains(declared, from):
			unknown(f.key, path, from)
			continue
		}
		route := Route{From: from}
		switch f.value.Kind {
		case yaml.ScalarNode:
			route.Next, _ = target(f.value, path)
		case yaml.MappingNode:
			cases, _ := p.mapping(f.value, path, "status → next role", nil)
			if len(f.value.Content) == 0 {
				p.fail(errAt(f.value, path, "empty mapping: name the next role, or map statuses to roles"))
				continue
			}
			var keys []*yaml.Node
			for _, c := range cases {
				to, _ := target(c.value, join(path, c.key.Value))
				if c.key.Value == FallbackKey {
					route.Fallback = to
					continue
				}
				if c.key.Value == "" {
					p.fail(errAt(c.key, path, "a status key must not be empty"))
					continue
				}
				keys = append(keys, c.key)
				route.Cases = append(route.Cases, Case{Status: c.key.Value, Next: to})
			}
			if r := valid[from]; r != nil {
				p.checkStatusKeys(r, f.key, path, keys, route.Fallback != "")
			}
		default:
			p.fail(errAt(f.value, path, "must be a role name, %s, or a mapping status → role; got %s", node.RoleEnd, describeNode(f.value)))
			continue
		}
		routes = append(routes, route)
	}
	if !hasStart {
		p.fail(errAt(n, "graph", "no entry for %s", node.RoleStart))
	}
	return routes, len(p.errs.list)+p.errs.omitted == before
}

// checkReachable refuses roles no path from __start__ leads to: they are
// almost always a misspelt graph entry.
func (p *parser) checkReachable(def *Definition) {
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
	for _, r := range def.Roles {
		if !seen[r.Name] {
			p.fail(&Error{Path: join("roles", r.Name), Line: r.line, Msg: fmt.Sprintf("unreachable from %s: no graph entry leads to it", node.RoleStart)})
		}
	}
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

// requiredString returns a non-blank string value, or reports why n is not
// one and returns "".
func (p *parser) requiredString(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.fail(errAt(n, path, "must be a string, got %s", describeNode(n)))
		return ""
	}
	if strings.TrimSpace(n.Value) == "" {
		p.fail(errAt(n, path, "must not be empty"))
		return ""
	}
	return n.Value
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

func sortedCopy(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	return out
}
