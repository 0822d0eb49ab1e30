package yamlwf

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// validYAML is the format's reference example, with deterministic agents.
const validYAML = `version: 1
description: Plan, code, review
agents:
  writer: {type: llm, model: default}
  script: {type: exec, command: ./roles/review.sh}
roles:
  planner:
    description: Breaks the task into phases
    prompt: |
      You plan.
    agent: writer
  coder:
    description: Writes the code
    prompt: You code.
    agent: {type: exec, command: sh, args: [-c, "echo '{}'"]}
  reviewer:
    description: Reviews the code
    prompt: You review.
    agent: script
    output:
      type: object
      properties: {status: {enum: [approved, rejected]}}
      required: [status]
graph:
  __start__: planner
  planner: coder
  coder: reviewer
  reviewer:
    approved: __end__
    rejected: coder
    FALLBACK: __end__
`

func TestParseValid(t *testing.T) {
	t.Parallel()
	def, err := Parse([]byte(validYAML))
	if err != nil {
		t.Fatal(err)
	}
	if def.Description != "Plan, code, review" || len(def.Roles) != 3 {
		t.Fatalf("def = %+v", def)
	}
	var names []string
	for _, r := range def.Roles {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "planner,coder,reviewer" {
		t.Fatalf("roles out of declaration order: %v", names)
	}
	if def.Roles[0].Agent.Kind != "llm" || def.Roles[0].Agent.Model != "default" || def.Roles[0].Prompt != "You plan.\n" {
		t.Fatalf("planner = %+v", def.Roles[0])
	}
	if def.Roles[2].Agent.Command != "./roles/review.sh" {
		t.Fatalf("reviewer agent = %+v", def.Roles[2].Agent)
	}
	if got := string(def.Roles[0].outputJSON); got != `{"type":"object"}` {
		t.Fatalf("default output schema = %s", got)
	}
	if got := string(def.Roles[2].outputJSON); got != `{"type":"object","properties":{"status":{"enum":["approved","rejected"]}},"required":["status"]}` {
		t.Fatalf("reviewer output schema = %s", got)
	}
	last := def.Routes[3]
	if last.From != "reviewer" || len(last.Cases) != 2 || last.Cases[1] != (Case{"rejected", "coder"}) || last.Fallback != "__end__" {
		t.Fatalf("reviewer route = %+v", last)
	}
}

// TestParseErrors: every way a workflow can be wrong gets an error naming
// where, and none is accepted.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	base := func(mutate func(string) string) string { return mutate(validYAML) }
	repl := func(old, new string) string {
		return base(func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("test bug: %q not in the example", old)
			}
			return strings.Replace(s, old, new, 1)
		})
	}
	role := func(extra string) string {
		return "version: 1\ndescription: d\nagent: {type: exec, command: cat}\nroles:\n" + extra
	}
	cases := []struct {
		name, yaml, want string
	}{
		{"empty", "", "empty workflow file"},
		{"only a comment", "# nothing\n", "empty workflow file"},
		{"not a mapping", "- a\n- b\n", "must be a mapping (the workflow), got a list"},
		{"scalar document", "hello\n", "got the string \"hello\""},
		{"malformed", "version: 1\n  description: [\n", "yaml: line"},
		{"tab indent", "version: 1\n\tdescription: x\n", "yaml: line 2"},
		{"unknown top key", repl("description: Plan", "descripton: typo\ndescription: Plan"), `line 2: descripton: unknown key (allowed: agent, agents, description, graph, roles, version)`},
		{"duplicate key", repl("description: Plan", "description: a\ndescription: Plan"), "duplicate"},
		{"no version", repl("version: 1\n", ""), "version: required"},
		{"version 2", repl("version: 1", "version: 2"), "version: must be 1, got the number 2"},
		{"version string", repl("version: 1", `version: "1"`), `version: must be 1, got the string "1"`},
		{"no description", repl("description: Plan, code, review\n", ""), "description: required"},
		{"blank description", repl("description: Plan, code, review", `description: "  "`), "description: must not be empty"},
		{"description list", repl("description: Plan, code, review", "description: [a]"), "description: must be a string, got a list"},
		{"no roles", role("") + "graph: {__start__: __end__}\n", "roles: must be a mapping"},
		{"empty roles", strings.Replace(role(""), "roles:\n", "roles: {}\n", 1) + "graph: {__start__: __end__}\n", "roles: at least one role is required"},
		{"no graph", role("  a: {description: d, prompt: p}\n"), "graph: required"},
		{"unknown agent", repl("agent: script", "agent: writr"), `roles.reviewer.agent: unknown agent "writr" (defined: script, writer)`},
		{"unknown agent none defined", role("  a: {description: d, prompt: p, agent: x}\n") + "graph: {__start__: a}\n", `roles.a.agent: unknown agent "x" (defined: none)`},
		{"agent number", repl("agent: script", "agent: 3"), "roles.reviewer.agent: must be an agent name or an inline agent spec, got the number 3"},
		{"unknown role target", repl("rejected: coder", "rejected: codr"), `graph.reviewer.rejected: unknown role "codr" (roles: planner, coder, reviewer)`},
		{"unknown graph source", repl("  planner: coder\n", "  planner: coder\n  plannr: coder\n"), `graph.plannr: unknown role "plannr"`},
		{"no start", repl("  __start__: planner\n", ""), "graph: no entry for __start__"},
		{"end as source", repl("  planner: coder\n", "  planner: coder\n  __end__: planner\n"), "graph.__end__: __end__ ends the thread"},
		{"start as target", repl("planner: coder", "planner: __start__"), "graph.planner: __start__ cannot be a target"},
		{"graph target list", repl("planner: coder", "planner: [coder]"), "graph.planner: must be a role name, __end__, or a mapping status → role; got a list"},
		{"graph case list", repl("rejected: coder", "rejected: [coder]"), "graph.reviewer.rejected: must be a role name or __end__, got a list"},
		{"graph empty case map", repl("planner: coder", "planner: {}\n  x: y"), "graph.planner: empty mapping"},
		{"graph not mapping", role("  a: {description: d, prompt: p}\n") + "graph: [a]\n", "graph: must be a mapping"},
		{"unreachable", repl("planner: coder", "planner: __end__"), "roles.coder: unreachable from __start__"},
		{"role missing description", repl("    description: Writes the code\n", ""), "roles.coder.description: required"},
		{"role missing prompt", repl("    prompt: You code.\n", ""), "roles.coder.prompt: required"},
		{"role unknown key", repl("    prompt: You code.\n", "    prompt: You code.\n    promt: typo\n"), "roles.coder.promt: unknown key (allowed: agent, description, output, prompt)"},
		{"role not mapping", role("  a: hello\n") + "graph: {__start__: a}\n", "roles.a: must be a mapping"},
		{"role bad name", role("  Coder: {description: d, prompt: p}\n") + "graph: {__start__: Coder}\n", `roles.Coder: invalid role name`},
		{"role reserved", role("  __end__: {description: d, prompt: p}\n") + "graph: {__start__: __end__}\n", "roles.__end__: __end__ is reserved"},
		{"role no agent", "version: 1\ndescription: d\nroles:\n  a: {description: d, prompt: p}\ngraph: {__start__: a}\n", "roles.a.agent: required (there is no top-level agent default)"},
		{"agent unknown field", repl("command: ./roles/review.sh", "comand: ./roles/review.sh"), "agents.script.comand: unknown key (allowed: args, assignee, command, env, maxRounds, model, timeout, tools, type, workflow, workspace)"},
		{"agent no type", repl("{type: llm, model: default}", "{model: default}"), "agents.writer: type is required"},
		{"agent bad type", repl("{type: llm, model: default}", "{type: gpt}"), `agents.writer: unknown type "gpt"`},
		{"agent field for wrong kind", repl("{type: llm, model: default}", "{type: llm, command: x}"), "agents.writer: command does not apply to a llm agent"},
		{"exec without command", repl("{type: exec, command: ./roles/review.sh}", "{type: exec}"), "agents.script: a exec agent needs a command"},
		{"agent wrong value type", repl("{type: llm, model: default}", "{type: llm, maxRounds: many}"), "agents.writer.maxRounds: must be an integer, got a string"},
		{"agent args not list", repl(`args: [-c, "echo '{}'"]`, "args: -c"), "roles.coder.agent.args: must be a list"},
		{"agent not mapping", repl("writer: {type: llm, model: default}", "writer: llm"), "agents.writer: must be an agent spec mapping"},
		{"agent bad name", repl("writer: {type: llm, model: default}", "1writer: {type: llm}"), "agents.1writer: invalid agent name"},
		{"default agent invalid", "version: 1\ndescription: d\nagent: {type: exec}\nroles:\n  a: {description: d, prompt: p}\ngraph: {__start__: a}\n", "line 3: agent: a exec agent needs a command"},
		{"default agent unknown name", "version: 1\ndescription: d\nagent: nobody\nroles:\n  a: {description: d, prompt: p}\ngraph: {__start__: a}\n", `agent: unknown agent "nobody" (defined: none)`},
		{"output string", role("  a: {description: d, prompt: p, output: object}\n") + "graph: {__start__: a}\n", `roles.a.output: must be a JSON Schema mapping, got the string "object"`},
		{"output list", repl("    agent: script\n    output:\n      type: object\n      properties: {status: {enum: [approved, rejected]}}\n      required: [status]\n", "    agent: script\n    output: [a]\n"), "roles.reviewer.output: must be a JSON Schema mapping, got a list"},
		{"output not object", repl("      type: object\n", "      type: string\n"), "roles.reviewer.output.type: must be object"},
		{"output invalid schema", repl("required: [status]", "required: status"), "roles.reviewer.output: invalid JSON Schema"},
		{"output remote ref", repl("required: [status]", "$ref: 'file:///etc/passwd'"), "roles.reviewer.output: invalid JSON Schema"},
		{"schema keyword typo", repl("required: [status]", "requierd: [status]"), `roles.reviewer.output.requierd: unknown JSON Schema keyword (a typo? extension keywords start with "x-")`},
		{"nested schema keyword typo", repl("{status: {enum: [approved, rejected]}}", "{status: {enmu: [approved, rejected]}}"), "roles.reviewer.output.properties.status.enmu: unknown JSON Schema keyword"},
		{"keyword typo in a list of schemas", repl("{status: {enum: [approved, rejected]}}", "{status: {anyOf: [{const: a}, {typ: string}]}}"), "roles.reviewer.output.properties.status.anyOf.typ: unknown JSON Schema keyword"},
		{"keyword typo in $defs", repl("required: [status]", "$defs: {x: {tpye: string}}"), "roles.reviewer.output.$defs.x.tpye: unknown JSON Schema keyword"},
		{"second document", validYAML + "---\nversion: 2\n", "line 32: a workflow file holds one YAML document"},
		{"malformed second document", validYAML + "---\n[\n", "yaml: line"},
		{"custom tag", repl("description: Plan, code, review", "description: !custom x"), "unsupported tag"},
		{"recursive alias", "a: &x [*x]\n", "alias"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v\n%s", def, c.yaml)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q\n%s", err, c.want, c.yaml)
			}
		})
	}
}

func TestErrorsCarryLines(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(strings.Replace(validYAML, "agent: script", "agent: writr", 1)))
	var pe *Error
	if !errors.As(err, &pe) || pe.Path != "roles.reviewer.agent" || pe.Line != 19 {
		t.Fatalf("err = %#v", err)
	}
	if err.Error() != `line 19: roles.reviewer.agent: unknown agent "writr" (defined: script, writer)` {
		t.Fatalf("text = %q", err)
	}
}

// TestParseAccepts: forms beside the reference example that must parse,
// and what each must come to.
func TestParseAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		check      func(t *testing.T, def *Definition)
	}{
		{"default agent", `version: 1
description: d
agent: {type: exec, command: cat}
roles:
  only: {description: d, prompt: p}
graph: {__start__: only}
`, func(t *testing.T, def *Definition) {
			if def.Roles[0].Agent.Kind != "exec" || def.Roles[0].Agent.Command != "cat" {
				t.Fatalf("agent = %+v", def.Roles[0].Agent)
			}
		}},
		// A relative workspace is relative to the file (ResolvePaths makes
		// it absolute at registration), not an invalid spec.
		{"relative workspace", `version: 1
description: d
agent: {type: react, workspace: ./ws}
roles:
  only: {description: d, prompt: p}
graph: {__start__: only}
`, func(t *testing.T, def *Definition) {
			if def.Roles[0].Agent.Workspace != "./ws" {
				t.Fatalf("workspace = %q", def.Roles[0].Agent.Workspace)
			}
		}},
		// Property names, enum values, defaults and extension keywords are
		// not mistaken for keywords.
		{"schema data is not keywords", `version: 1
description: d
agent: {type: exec, command: cat}
roles:
  a:
    description: d
    prompt: p
    output:
      type: object
      x-ui: {widget: fancy}
      properties:
        anything: {type: string, default: {whatever: 1}, examples: [{tpye: 1}]}
        items: {type: array, prefixItems: [{const: {enmu: 1}}], items: false}
      patternProperties: {"^x": {type: string}}
      dependentRequired: {anything: [items]}
      if: {properties: {anything: {const: a}}}
      then: {required: [items]}
graph: {__start__: a}
`, nil},
		{"$schema keyword is dropped", `version: 1
description: d
agent: {type: exec, command: cat}
roles:
  a:
    description: d
    prompt: p
    output: {$schema: "https://json-schema.org/draft/2020-12/schema", type: object, required: [x]}
graph: {__start__: a}
`, func(t *testing.T, def *Definition) {
			if got := string(def.Roles[0].outputJSON); got != `{"type":"object","required":["x"]}` {
				t.Fatalf("schema sent to agents = %s", got)
			}
			if _, ok := def.Roles[0].Output.Get("$schema"); ok {
				t.Fatal("descriptor schema keeps $schema")
			}
		}},
		{"aliases are followed", `version: 1
description: d
agents:
  a: &spec {type: exec, command: cat}
roles:
  one: {description: d, prompt: &p p, agent: *spec}
  two: {description: d, prompt: *p, agent: a}
graph: {__start__: one, one: two}
`, func(t *testing.T, def *Definition) {
			if def.Roles[0].Agent.Command != "cat" || def.Roles[1].Prompt != "p" {
				t.Fatalf("roles = %+v", def.Roles)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if c.check != nil {
				c.check(t, def)
			}
		})
	}
}

func TestResolvePaths(t *testing.T) {
	t.Parallel()
	src := []byte(`# a comment survives
version: 1
description: d
agent: {type: exec, command: ./bin/default.sh, workspace: work}
agents:
  s: {type: exec, command: ../up.sh}
roles:
  a: {description: d, prompt: p, agent: s}
  b: {description: d, prompt: p, agent: {type: exec, command: sh, args: [./x.sh]}}
  c: {description: d, prompt: p, agent: {type: exec, command: /abs/c.sh}}
  d: {description: d, prompt: p}
graph: {__start__: a, a: b, b: c, c: d}
`)
	out, err := ResolvePaths(src, "/base/dir")
	if err != nil {
		t.Fatal(err)
	}
	def, err := Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string][2]string{
		"a": {"/base/up.sh", ""},
		"b": {"sh", ""}, // a bare name is looked up on PATH; args are not paths we know of
		"c": {"/abs/c.sh", ""},
		"d": {"/base/dir/bin/default.sh", "/base/dir/work"},
	}
	for _, r := range def.Roles {
		if got := [2]string{r.Agent.Command, r.Agent.Workspace}; got != want[r.Name] {
			t.Errorf("role %s: command, workspace = %q, want %q", r.Name, got, want[r.Name])
		}
	}
	if def.Roles[1].Agent.Args[0] != "./x.sh" {
		t.Errorf("args changed: %v", def.Roles[1].Agent.Args)
	}
	if !strings.Contains(string(out), "# a comment survives") {
		t.Errorf("comment lost:\n%s", out)
	}
	same := []byte(strings.Replace(string(src), "./bin/default.sh, workspace: work", "/x", 1))
	same = []byte(strings.Replace(string(same), "../up.sh", "cat", 1))
	if out, err := ResolvePaths(same, "/base/dir"); err != nil || string(out) != string(same) {
		t.Errorf("nothing to resolve must keep the bytes: %v\n%s", err, out)
	}
	if _, err := ResolvePaths(src, "relative"); err == nil {
		t.Error("relative base accepted")
	}
	if _, err := ResolvePaths([]byte("a: [\n"), filepath.Join("/", "x")); err == nil {
		t.Error("malformed YAML accepted")
	}
}

func TestVersionTagIsTheParsersNotOurs(t *testing.T) {
	t.Parallel()
	// The version check relies on yaml.v3 resolving plain scalars' tags
	// when decoding into a node.
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("v: 1\n"), &n); err != nil {
		t.Fatal(err)
	}
	if tag := n.Content[0].Content[1].Tag; tag != "!!int" {
		t.Fatalf("tag = %q", tag)
	}
}

// TestParseGoesOnAfterEveryKindOfProblem: the walk continues past each
// problem, so every part it reaches after one must cope with what the
// broken part left behind. Removing any one line, or replacing any value
// with a list, of a workflow that uses every feature must give a
// definition or an error — never a panic, never both, never neither.
func TestParseGoesOnAfterEveryKindOfProblem(t *testing.T) {
	t.Parallel()
	lines := strings.Split(validYAML, "\n")
	var variants []string
	for i := range lines {
		variants = append(variants, strings.Join(append(append([]string(nil), lines[:i]...), lines[i+1:]...), "\n"))
		if k, _, ok := strings.Cut(lines[i], ":"); ok {
			variants = append(variants, strings.Join(append(append(append([]string(nil), lines[:i]...), k+": [x]"), lines[i+1:]...), "\n"))
			variants = append(variants, strings.Join(append(append(append([]string(nil), lines[:i]...), k+": {}"), lines[i+1:]...), "\n"))
		}
	}
	for _, v := range variants {
		def, err := Parse([]byte(v))
		if (def == nil) == (err == nil) {
			t.Fatalf("def %v, err %v for\n%s", def, err, v)
		}
		var list *ErrorList
		if err != nil && errors.As(err, &list) && len(list.Problems) == 0 {
			t.Fatalf("an empty problem list for\n%s", v)
		}
	}
}
