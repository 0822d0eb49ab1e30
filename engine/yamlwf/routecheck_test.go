package yamlwf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/agents"
)

// reviewWorkflow is a writer/reviewer loop whose reviewer declares output
// and routes by route, so each case varies only those two.
func reviewWorkflow(output, route string) string {
	return `version: 1
description: review loop
agent: {type: exec, command: x}
roles:
  writer: {description: d, prompt: p}
  reviewer:
    description: d
    prompt: p
    output: ` + output + `
graph:
  __start__: writer
  writer: reviewer
  reviewer: ` + route + "\n"
}

const statusEnum = `{type: object, properties: {status: {enum: [approved, rejected]}}, required: [status]}`

// TestRouteKeysAreCheckedAgainstTheStatusEnum: a key no status can take and
// a status no key routes are refused when the file is parsed, each named
// with its path.
func TestRouteKeysAreCheckedAgainstTheStatusEnum(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, output, route string
		want                []string
	}{
		// The suggestion is the status left without a route: one report.
		{"misspelt key", statusEnum, `{aproved: __end__, rejected: writer}`, []string{
			`line 13: graph.reviewer.aproved: no such status (did you mean "approved"?)`,
		}},
		{"misspelt key and a status without a route", statusEnum, `{aproved: __end__}`, []string{
			`line 13: graph.reviewer.aproved: no such status (did you mean "approved"?)`,
			`line 13: graph.reviewer: status "rejected" has no route`,
		}},
		{"misspelt key beside FALLBACK is still an error", statusEnum, `{aproved: __end__, rejected: writer, FALLBACK: __end__}`, []string{
			`graph.reviewer.aproved: no such status (did you mean "approved"?)`,
		}},
		{"key far from every status", statusEnum, `{approved: __end__, rejected: writer, lgtm: __end__}`, []string{
			`graph.reviewer.lgtm: no such status (roles.reviewer.output allows: "approved", "rejected")`,
		}},
		{"status without a route", statusEnum, `{approved: __end__}`, []string{
			`graph.reviewer: status "rejected" has no route (add rejected: <role or __end__>, or a FALLBACK entry)`,
		}},
		{"const is a one-status enum", `{type: object, properties: {status: {const: done}}, required: [status]}`, `{don: __end__}`, []string{
			`graph.reviewer.don: no such status (did you mean "done"?)`,
		}},
		{"const without its route", `{type: object, properties: {status: {const: done}}, required: [status]}`, `{failed: __end__}`, []string{
			`graph.reviewer.failed: no such status (roles.reviewer.output allows: "done")`,
			`graph.reviewer: status "done" has no route`,
		}},
		{"a status that is not a string can never match", `{type: object, properties: {status: {enum: [approved, 3]}}, required: [status]}`, `{approved: __end__}`, []string{
			`graph.reviewer: status 3 has no route: keys match string statuses only`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := reviewWorkflow(c.output, c.route)
			def, err := Parse([]byte(src))
			if err == nil {
				t.Fatalf("accepted: %+v\n%s", def, src)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			var list *ErrorList
			if !errors.As(err, &list) || len(list.Problems) != len(c.want) {
				t.Errorf("want %d problems, got %v", len(c.want), err)
			}
		})
	}
}

// TestRouteKeysThatCannotBeCheckedWarn: what Parse cannot rule out is a
// warning, not an error, and a FALLBACK silences it.
func TestRouteKeysThatCannotBeCheckedWarn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, output, route, want string
	}{
		{"no output schema", `{type: object}`, `{approved: __end__, rejected: writer}`,
			"line 13: graph.reviewer: route keys are not checked: roles.reviewer.output does not list the statuses (properties.status.enum); a status no key matches fails the thread (add the enum, or a FALLBACK entry)"},
		{"status without enum", `{type: object, properties: {status: {type: string}}}`, `{approved: __end__}`,
			"graph.reviewer: route keys are not checked"},
		{"status not required", `{type: object, properties: {status: {enum: [approved, rejected]}}}`, `{approved: __end__, rejected: writer}`,
			"graph.reviewer: roles.reviewer.output does not require status; a step without one fails the thread (add status to required, or a FALLBACK entry)"},
		{"FALLBACK covers an unlisted status", `{type: object}`, `{approved: __end__, FALLBACK: writer}`, ""},
		{"FALLBACK covers enum values without a key", statusEnum, `{approved: __end__, FALLBACK: writer}`, ""},
		{"every status routed", statusEnum, `{approved: __end__, rejected: writer}`, ""},
		{"an unconditional route has nothing to check", `{type: object}`, `writer`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			def, err := Parse([]byte(reviewWorkflow(c.output, c.route)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range def.Warnings {
				got = append(got, w.Error())
			}
			switch {
			case c.want == "" && len(got) > 0:
				t.Fatalf("warnings: %q", got)
			case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
				t.Fatalf("warnings %q, want one with %q", got, c.want)
			}
		})
	}
}

// TestEveryProblemIsReportedAtOnce: problems in different parts of a file
// come back together, in file order, each with its line — and a broken
// part is not reported again by what refers to it.
func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	src := `version: 2
description: d
agents:
  broken: {type: exec}
roles:
  writer: {description: d, prompt: p, agent: broken}
  reviewer:
    description: d
    promt: p
    agent: {type: exec, command: x}
    output: ` + statusEnum + `
graph:
  __start__: writer
  writer: reviewer
  reviewer: {aproved: __end__, rejected: writr, FALLBACK: __end__}
`
	_, err := Parse([]byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	want := `5 problems:
  line 1: version: must be 1, got the number 2
  line 4: agents.broken: a exec agent needs a command
  line 8: roles.reviewer.prompt: required
  line 9: roles.reviewer.promt: unknown key (allowed: agent, description, output, prompt)
  line 15: graph.reviewer.rejected: unknown role "writr" (roles: writer, reviewer)`
	if err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Path != "version" || pe.Line != 1 {
		t.Fatalf("errors.As finds %+v", pe)
	}
}

// TestManyProblemsAreCapped: a file with more problems than anyone reads
// shows MaxShown of them and counts the rest.
func TestManyProblemsAreCapped(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("version: 1\ndescription: d\nagent: {type: exec, command: x}\nroles:\n")
	for i := range 30 {
		fmt.Fprintf(&b, "  Role%d: {description: d, prompt: p}\n", i)
	}
	b.WriteString("graph: {__start__: Role0}\n")
	_, err := Parse([]byte(b.String()))
	if err == nil {
		t.Fatal("accepted")
	}
	text := err.Error()
	lines := strings.Split(text, "\n")
	if lines[0] != "30 problems:" || len(lines) != 1+MaxShown+1 || lines[len(lines)-1] != "  … and 10 more" {
		t.Fatalf("error:\n%s", text)
	}
	if !strings.HasPrefix(lines[1], "  line 5: roles.Role0: invalid role name") {
		t.Fatalf("first problem: %q", lines[1])
	}
}

// TestUnroutedStatusFailsTheRun: at run time a status no key matches and
// no FALLBACK covers fails the run with an error naming it, after the
// step that returned it was stored.
func TestUnroutedStatusFailsTheRun(t *testing.T) {
	t.Parallel()
	w, err := Load([]byte(`version: 1
description: review once
agent: {type: exec, command: reviewer}
roles:
  reviewer: {description: d, prompt: p}
graph:
  __start__: reviewer
  reviewer: {approved: __end__, rejected: reviewer}
`), Options{NewAgent: factory(map[string]agentFunc{
		"reviewer": func(context.Context, agents.Call) (agents.Result, error) {
			return agents.Result{Meta: metaOf(t, `{"status":"maybe"}`)}, nil
		},
	})})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Definition().Warnings) != 1 {
		t.Fatalf("warnings: %v", w.Definition().Warnings)
	}
	r, err := w.Start(context.Background(), startThread("review"), newTestHost(t))
	if err != nil {
		t.Fatal(err)
	}
	out, done, err := r.Next(context.Background())
	if err != nil || done != nil || out.Role != "reviewer" {
		t.Fatalf("first step: %+v %+v %v", out, done, err)
	}
	_, done, err = r.Next(context.Background())
	var re *RouteError
	if !errors.As(err, &re) || done != nil {
		t.Fatalf("second call: done %+v, err %v", done, err)
	}
	if want := `role "reviewer" returned status "maybe", and no route of graph.reviewer matches it (keys: approved, rejected; no FALLBACK)`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}
