package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workflowWithAgent is a one-role workflow whose role runs agent.
func workflowWithAgent(agent string) string {
	return "version: 1\ndescription: d\nroles:\n  only:\n    description: d\n    prompt: p\n    agent: " + agent + "\ngraph: {__start__: only}\n"
}

// workflow add refuses an agent whose program is not there, naming the
// program and where it looked, and registers nothing; a program that is
// there passes.
func TestAddRefusesAMissingProgram(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{"bin/tool", 0o755}, {"run.sh", 0o755}, {"plain.txt", 0o644}} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho '{}'\n"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	c.env["PATH"] = bin + string(filepath.ListSeparator) + "/nonexistent"
	file := filepath.Join(dir, "w.yaml")
	for _, tc := range []struct {
		agent string
		want  string // "" registers
	}{
		{"{type: exec, command: ./run.sh}", ""},
		{"{type: exec, command: " + filepath.Join(dir, "run.sh") + "}", ""},
		{"{type: exec, command: tool}", ""},
		{"{type: cli, command: tool, args: ['{prompt}']}", ""},
		{"{type: cursor}", ""}, // no command: its default is found when it runs
		{"{type: exec, command: ./missing.sh}", `line 4: roles.only.agent: exec program "./missing.sh" not found: ` + filepath.Join(dir, "missing.sh") + " does not exist"},
		{"{type: exec, command: /nonexistent/prog}", `exec program "/nonexistent/prog" not found: /nonexistent/prog does not exist`},
		{"{type: exec, command: ./bin}", `exec program "./bin" is a directory: ` + bin},
		{"{type: exec, command: ./plain.txt}", `exec program "./plain.txt" is not executable: ` + filepath.Join(dir, "plain.txt") + " (chmod +x it)"},
		{"{type: exec, command: no-such-tool}", `exec program "no-such-tool" not found on PATH (` + c.env["PATH"] + "); give its path, or install it"},
		{"{type: cli, command: ./missing.sh}", `cli program "./missing.sh" not found`},
		{"{type: hermes, command: no-such-hermes}", `hermes program "no-such-hermes" not found on PATH`},
	} {
		if err := os.WriteFile(file, []byte(workflowWithAgent(tc.agent)), 0o644); err != nil {
			t.Fatal(err)
		}
		before := c.snapshot()
		out, errs, code := c.run("workflow", "add", "w", file)
		if tc.want == "" {
			if code != 0 || !strings.HasPrefix(out, "registered workflow") && !strings.Contains(out, "unchanged") {
				t.Errorf("%s: exit %d\n%s%s", tc.agent, code, out, errs)
			}
			continue
		}
		if code != 1 || out != "" || !strings.HasPrefix(errs, "w.yaml: ") || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant %q", tc.agent, code, out, errs, tc.want)
		}
		c.unchanged(before)
	}

	// A named agent is checked for every role that uses it, all at once.
	named := "version: 1\ndescription: d\nagents:\n  script: {type: exec, command: ./gone.sh}\nroles:\n  a: {description: d, prompt: p, agent: script}\n  b: {description: d, prompt: p, agent: script}\ngraph: {__start__: a, a: b}\n"
	if err := os.WriteFile(file, []byte(named), 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails("w.yaml: 2 problems:\n  line 6: roles.a.agent: exec program \"./gone.sh\" not found", "workflow", "add", "w", file)

	empty := newCLI(t) // no PATH at all
	if err := os.WriteFile(file, []byte(workflowWithAgent("{type: exec, command: sh}")), 0o644); err != nil {
		t.Fatal(err)
	}
	empty.fails(`exec program "sh" not found: PATH is empty (give its absolute path)`, "workflow", "add", "w", file)
}

// An llm or react role added before setup registers, with a warning that
// says to run setup; once a model is set up, no warning. A model the config
// cannot resolve is named.
func TestAddWarnsWhenNoModelIsSetUp(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "w.yaml")
	two := "version: 1\ndescription: d\nagent: {type: llm}\nroles:\n  a: {description: d, prompt: p}\n  b: {description: d, prompt: p, agent: {type: llm, model: writer}}\n  c: {description: d, prompt: p, agent: {type: exec, command: /bin/true}}\ngraph: {__start__: a, a: b, b: c}\n"
	if err := os.WriteFile(file, []byte(two), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := c.run("workflow", "add", "w", file)
	if code != 0 || !strings.HasPrefix(out, "registered workflow") {
		t.Fatalf("add before setup: exit %d\n%s%s", code, out, errs)
	}
	if want := "warning: w.yaml: roles a and b call a model, but no model is set up yet: run `uncaged-workflow setup` before running it\n"; errs != want {
		t.Errorf("stderr %q\nwant   %q", errs, want)
	}

	c.ok("setup", "--provider", "p", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "env:P_KEY", "--default-model", "p/m")
	if err := os.WriteFile(file, []byte(two+"# v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := c.run("workflow", "add", "w", file); code != 0 || errs != "" {
		t.Errorf("add after setup: exit %d\n%s%s", code, out, errs)
	}

	direct := strings.Replace(two, "model: writer", "model: nowhere/m", 1)
	if err := os.WriteFile(file, []byte(direct), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = c.run("workflow", "add", "w", file)
	if want := `warning: w.yaml: line 6: roles.b.agent: model "nowhere/m" cannot be resolved: unknown provider "nowhere" in model reference "nowhere/m"; run ` + "`uncaged-workflow setup`"; code != 0 || !strings.HasPrefix(errs, want) {
		t.Errorf("an unknown provider: exit %d, stderr %q\nwant %q…", code, errs, want)
	}
}
