package agents

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/uncaged/workflow/engine/workflow"
)

// ThreadInput is the user message an agent gets for a thread: the parent
// context of a child thread, the task, the latest step in full (by content
// hash) and earlier steps by their meta, and how to read more
// (the original's buildThreadInput). The role's system
// prompt is not part of it.
func ThreadInput(t workflow.ThreadContext) string {
	var b strings.Builder
	if t.Start.ParentState != "" {
		b.WriteString("## Parent Context\n")
		fmt.Fprintf(&b, "This workflow was spawned by a parent workflow. The parent's state at spawn time is available at hash: %s\n", t.Start.ParentState)
		fmt.Fprintf(&b, "Use `uncaged-workflow cas get %s` to inspect the parent's context and trace back through its steps.\n\n", t.Start.ParentState)
	}
	b.WriteString("## Task\n")
	b.WriteString(t.Start.Content)
	steps := t.Steps
	if len(steps) == 0 {
		return b.String()
	}
	if len(steps) > 1 {
		b.WriteString("\n\n## Previous Steps")
		for i, s := range steps[:len(steps)-1] {
			fmt.Fprintf(&b, "\n\n### Step %d: %s\nSummary: %s", i+1, s.Role, metaJSON(s))
		}
		b.WriteString("\n\n## Latest Step: ")
	} else {
		b.WriteString("\n\n## Step: ")
	}
	last := steps[len(steps)-1]
	fmt.Fprintf(&b, "%s\n\nContentHash: %s\nMeta: %s", last.Role, last.ContentHash, metaJSON(last))
	fmt.Fprintf(&b, "\n\n## Tools\nUse `uncaged-workflow thread %s` to read full details of any previous step.", t.ThreadID)
	return b.String()
}

// metaJSON is a step's meta as compact JSON in its stored key order.
func metaJSON(s workflow.RoleStep) string {
	if s.Meta == nil {
		return "{}"
	}
	data, err := json.Marshal(s.Meta)
	if err != nil {
		return "{}"
	}
	return string(data)
}
