package agents

import (
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/workflow"
)

func TestThreadInput(t *testing.T) {
	t.Parallel()
	base := workflow.ThreadContext{ThreadID: "01TEST000000000000000000TR", Start: workflow.StartStep{Content: "fix the bug"}}
	if got, want := ThreadInput(base), "## Task\nfix the bug"; got != want {
		t.Fatalf("no steps: got %q, want %q", got, want)
	}

	one := base
	one.Steps = []workflow.RoleStep{{Role: "coder", ContentHash: "SSVQ0RZ55P9Y4", Meta: canonyaml.Map{{Key: "n", Value: 1}}}}
	want := "## Task\nfix the bug\n\n## Step: coder\n\nContentHash: SSVQ0RZ55P9Y4\nMeta: {\"n\":1}\n\n## Tools\n" +
		"Use `uncaged-workflow thread 01TEST000000000000000000TR` to read full details of any previous step."
	if got := ThreadInput(one); got != want {
		t.Fatalf("one step:\n got %q\nwant %q", got, want)
	}

	three := base
	three.Start.ParentState = "4V3R4ZC8KXPT6"
	three.Steps = []workflow.RoleStep{
		{Role: "planner", ContentHash: "AAAAAAAAAAAAA", Meta: canonyaml.Map{{Key: "n", Value: 1}}},
		{Role: "coder", ContentHash: "BBBBBBBBBBBBB", Meta: canonyaml.Map{{Key: "n", Value: 2}}},
		{Role: "reviewer", ContentHash: "CCCCCCCCCCCCC", Meta: canonyaml.Map{{Key: "ok", Value: true}}},
	}
	got := ThreadInput(three)
	for _, part := range []string{
		"## Parent Context\n", "cas get 4V3R4ZC8KXPT6", "## Task\nfix the bug", "## Previous Steps",
		"### Step 1: planner\nSummary: {\"n\":1}", "### Step 2: coder\nSummary: {\"n\":2}",
		"## Latest Step: reviewer\n\nContentHash: CCCCCCCCCCCCC\nMeta: {\"ok\":true}", "## Tools",
	} {
		if !strings.Contains(got, part) {
			t.Errorf("three steps: missing %q in\n%s", part, got)
		}
	}
	if strings.Contains(got, "AAAAAAAAAAAAA") || strings.Contains(got, "BBBBBBBBBBBBB") {
		t.Errorf("earlier steps' content hashes must not be inlined:\n%s", got)
	}
	if !strings.HasPrefix(got, "## Parent Context") {
		t.Errorf("parent context must come first:\n%s", got)
	}
}
