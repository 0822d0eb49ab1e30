package cli

import (
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/yamlwf"
)

func TestSkillIndexAndTopics(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	index := c.ok("skill")
	if !strings.HasPrefix(index, "# uncaged-workflow skill\n") || !strings.Contains(index, "skill <topic>") ||
		strings.Contains(index, "# uncaged-workflow help --skill") {
		t.Fatalf("index = %q", index)
	}
	for _, topic := range skillTopics {
		if !strings.Contains(index, "`"+topic.name+"`") {
			t.Errorf("index lacks %s", topic.name)
		}
	}
	if names := []string{skillTopics[0].name, skillTopics[1].name, skillTopics[2].name}; strings.Join(names, ",") != "cli,develop,author" {
		t.Fatalf("topics = %v", names)
	}

	out, errs, code := c.run("skill", "unknown")
	if code != 1 || out != "" || !strings.HasPrefix(errs, "unknown skill topic: unknown\n\n# uncaged-workflow skill") {
		t.Fatalf("unknown topic: %d %q %q", code, out, errs)
	}
	c.fails("skill takes at most one topic", "skill", "cli", "author")
	c.fails("unknown flag: --all", "skill", "--all")
}

func TestSkillCliDocumentsEveryCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	doc := c.ok("skill", "cli")
	for _, s := range []string{"# uncaged-workflow CLI Reference", "## Core Concepts", "### workflow", "### thread", "### cas",
		"### init", "### setup", "### build", "### skill", "### connect", "### Top-level shortcuts", "## Exit Codes",
		"## Environment Variables", "## Typical Workflow", "## Thread Status", "WORKFLOW_STORAGE_ROOT", "UNCAGED_WORKFLOW_STORAGE_ROOT",
		"`setup` | `[--provider <name>]", "`init workspace` | `<name>`", "`run` | `thread run`", "`live` | `thread live`"} {
		if !strings.Contains(doc, s) {
			t.Errorf("cli doc lacks %q", s)
		}
	}
	for _, sub := range []string{"workflow add", "workflow list", "workflow show", "workflow rm", "workflow history", "workflow rollback",
		"thread run", "thread list", "thread show", "thread rm", "thread fork", "thread ps", "thread kill", "thread live",
		"thread pause", "thread resume", "cas get", "cas put", "cas list", "cas rm", "cas gc"} {
		if !strings.Contains(doc, "| `"+sub+"` |") {
			t.Errorf("cli doc lacks a row for %s", sub)
		}
	}
	// A row of a two- or three-column table has three or four unescaped
	// pipes; an unescaped "|" in an argument list would add one.
	for _, line := range strings.Split(doc, "\n") {
		n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|")
		if strings.HasPrefix(line, "| `") && n != 3 && n != 4 {
			t.Errorf("broken table row: %s", line)
		}
	}
	if strings.Contains(doc, "{{commands}}") || strings.Contains(doc, "`help") || strings.Contains(doc, "`completion") {
		t.Fatal("command tables not rendered cleanly")
	}
}

func TestSkillGuides(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	checks := map[string][]string{
		"develop": {"Thread ID", "Crockford Base32", "cas put", "cas get", "Meta Output"},
		"author": {"Bundle Structure", ".esm.js", "`node:fs/promises`", "`node:child_process`", "WorkflowDescriptor", "Role Definition", "uncaged-workflow build",
			"workflow add", ".yaml", "llmAdapter", "reactAdapter", "cliAdapter", "cursorAdapter", "hermesAdapter", "execAdapter",
			"workflowAdapter", "fnAdapter", "agentAdapter"},
	}
	for topic, want := range checks {
		doc := c.ok("skill", topic)
		if strings.Contains(doc, "{{") {
			t.Errorf("skill %s has an unrendered marker", topic)
		}
		for _, s := range want {
			if !strings.Contains(doc, s) {
				t.Errorf("skill %s lacks %q", topic, s)
			}
		}
	}
}

func TestRootUsageListsAuthoringCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, _, code := c.run()
	if code != 1 {
		t.Fatalf("no args: exit %d", code)
	}
	for _, s := range []string{"uncaged-workflow — workflow engine CLI\n", "Development:", "init workspace <name>", "init template <name>",
		"build [dir | entry.ts ...]", "Configuration:", "setup [--provider <name>]", "Reference:", "skill [topic]",
		"Agent-consumable docs", "Use <command> --help for subcommand details."} {
		if !strings.Contains(out, s) {
			t.Errorf("usage lacks %q", s)
		}
	}
	for _, args := range [][]string{{"init", "--help"}, {"setup", "--help"}, {"setup", "-h"}, {"build", "--help"}, {"skill", "--help"}} {
		if _, _, code := c.run(args...); code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
}

// TestAuthorYAMLExampleParses keeps the documented YAML workflow valid.
func TestAuthorYAMLExampleParses(t *testing.T) {
	t.Parallel()
	doc, err := skillDoc("author", newRoot(Env{}))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(doc, "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("author doc has no yaml example")
	}
	if _, err := yamlwf.Parse([]byte(example)); err != nil {
		t.Fatalf("documented YAML workflow does not parse: %v\n%s", err, example)
	}
}
