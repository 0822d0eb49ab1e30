package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/yamlwf"
)

const tinyYAML = `version: 1
description: One step
agent: {type: exec, command: ./step.sh}
roles:
  only: {description: Does it, prompt: Do it.}
graph: {__start__: only}
`

// stepScriptDir is a directory with the ./step.sh the workflows here run.
func stepScriptDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "step.sh"), []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAddYAMLWorkflow: a .yml file is stored under its own name with a
// descriptor, its relative command made absolute, and the loader picks the
// YAML workflow for its hash and the bundle for a bundle's.
func TestAddYAMLWorkflow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := stepScriptDir(t)
	file := filepath.Join(src, "tiny.yml")
	if err := os.WriteFile(file, []byte(tinyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	out := c.ok("workflow", "add", "tiny", file)
	hash := strings.TrimSpace(strings.TrimPrefix(out, `registered workflow "tiny" from tiny.yml as `))
	l := storage.Layout{Root: c.root}
	stored, err := os.ReadFile(l.YAMLWorkflowFile(hash))
	if err != nil {
		t.Fatalf("%v (add said %q)", err, out)
	}
	if !strings.Contains(string(stored), "command: "+filepath.Join(src, "step.sh")) {
		t.Fatalf("stored:\n%s", stored)
	}
	if !l.HasBundle(hash) {
		t.Fatal("HasBundle misses the YAML workflow")
	}
	if d, err := os.ReadFile(l.DescriptorFile(hash)); err != nil || !strings.Contains(string(d), `"description": "One step"`) {
		t.Fatalf("descriptor: %v\n%s", err, d)
	}
	// Adding the same file again stores nothing new and is fine.
	c.ok("workflow", "add", "tiny", file)

	js := filepath.Join(src, "flow.esm.js")
	if err := os.WriteFile(js, []byte(`export const descriptor = { description: "js", roles: {}, graph: { edges: [] } };
export const run = async function* () { return { returnCode: 0, summary: "ok" }; };
`), 0o644); err != nil {
		t.Fatal(err)
	}
	jsOut := c.ok("workflow", "add", "flow", js)
	jsHash := strings.TrimSpace(jsOut[strings.LastIndex(jsOut, " ")+1:])

	load := (&app{env: Env{Getenv: func(k string) string { return c.env[k] }}}).workflowLoader(l)
	if wf, err := load(hash); err != nil {
		t.Fatal(err)
	} else if _, ok := wf.(*yamlwf.Workflow); !ok {
		t.Fatalf("loaded %T for a YAML workflow", wf)
	}
	if wf, err := load(jsHash); err != nil {
		t.Fatal(err)
	} else if _, ok := wf.(*jsrt.Bundle); !ok {
		t.Fatalf("loaded %T for a bundle", wf)
	}
	if _, err := load("D7V7WGCMTYHZG"); err == nil || !strings.Contains(err.Error(), "bundle file missing") {
		t.Fatalf("missing workflow: %v", err)
	}
	// A stored YAML workflow that no longer parses (edited by hand) fails
	// to load with the reason.
	if err := os.WriteFile(l.YAMLWorkflowFile("D7V7WGCMTYHZG"), []byte("version: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := load("D7V7WGCMTYHZG"); err == nil || !strings.Contains(err.Error(), "YAML workflow D7V7WGCMTYHZG: 4 problems:\n  line 1: description: required") {
		t.Fatalf("broken stored workflow: %v", err)
	}
}

func TestAddBrokenYAMLChangesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := stepScriptDir(t)
	good := filepath.Join(src, "good.yaml")
	if err := os.WriteFile(good, []byte(tinyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", "keep-me", good)
	before := c.snapshot()
	for _, bad := range []struct{ content, want string }{
		{"version: 1\ngraph: [\n", "bad.yaml: yaml: line"},
		{strings.Replace(tinyYAML, "graph: {__start__: only}", "graph: {__start__: onyl}", 1), `bad.yaml: line 6: graph.__start__: unknown role "onyl" (roles: only)`},
		{strings.Replace(tinyYAML, "version: 1", "version: 1\nextra: true", 1), "bad.yaml: line 2: extra: unknown key"},
	} {
		path := filepath.Join(src, "bad.yaml")
		if err := os.WriteFile(path, []byte(bad.content), 0o644); err != nil {
			t.Fatal(err)
		}
		c.fails(bad.want, "workflow", "add", "broken", path)
	}
	c.fails("--types applies to .esm.js bundles only", "workflow", "add", "broken", good, "--types", "x.d.ts")
	c.unchanged(before)
}

// reviewYAML is the example: a reviewer whose schema allows
// approved and rejected, routed by route.
func reviewYAML(route string) string {
	return `version: 1
description: Write until the reviewer approves
agent: {type: exec, command: ./step.sh}
roles:
  writer: {description: Writes, prompt: Write.}
  reviewer:
    description: Reviews
    prompt: Review.
    output: {type: object, properties: {status: {enum: [approved, rejected]}}, required: [status]}
graph:
  __start__: writer
  writer: reviewer
  reviewer: ` + route + "\n"
}

// TestAddYAMLChecksRouteKeys: workflow add refuses a route key that is not
// a status of the role's schema, with a suggestion, and a status with no
// route, both in one report, and registers nothing.
func TestAddYAMLChecksRouteKeys(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := stepScriptDir(t)
	path := filepath.Join(src, "review.yaml")
	if err := os.WriteFile(path, []byte(reviewYAML("{aproved: __end__}")), 0o644); err != nil {
		t.Fatal(err)
	}
	before := c.snapshot()
	out, stderr, code := c.run("workflow", "add", "review", path)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{
		"review.yaml: 2 problems:\n",
		`  line 13: graph.reviewer.aproved: no such status (did you mean "approved"?)` + "\n",
		`  line 13: graph.reviewer: status "rejected" has no route (add rejected: <role or __end__>, or a FALLBACK entry)`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	c.unchanged(before)

	// Fixed, it registers without a word on stderr.
	if err := os.WriteFile(path, []byte(reviewYAML("{approved: __end__, rejected: writer}")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := c.run("workflow", "add", "review", path); code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestAddYAMLWarnsWhenKeysCannotBeChecked: a schema that does not list the
// statuses registers, with a warning that an unmatched status fails the
// thread.
func TestAddYAMLWarnsWhenKeysCannotBeChecked(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := stepScriptDir(t)
	path := filepath.Join(src, "review.yaml")
	content := strings.Replace(reviewYAML("{approved: __end__, rejected: writer}"), "{status: {enum: [approved, rejected]}}", "{status: {type: string}}", 1)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := c.run("workflow", "add", "review", path)
	if code != 0 || !strings.HasPrefix(out, `registered workflow "review"`) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	want := "warning: review.yaml: line 13: graph.reviewer: route keys are not checked: roles.reviewer.output does not list the statuses (properties.status.enum); a status no key matches fails the thread (add the enum, or a FALLBACK entry)\n"
	if stderr != want {
		t.Fatalf("stderr %q, want %q", stderr, want)
	}
}
