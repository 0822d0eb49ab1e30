package cli

import (
	"fmt"

	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/registry"
)

// oversightSummary is setup's word on the supervisor and the summarizer:
// which model each uses under cfg (they fall back to models.default, so a
// first setup switches both on) and how to change or stop that.
func oversightSummary(cfg *registry.Config) string {
	supervisor, summarizer := executor.OversightScenes(cfg)
	uses := func(scene string) string {
		return fmt.Sprintf("models.%s (%s)", scene, cfg.Models[scene])
	}
	sup := "supervisor: off (supervisorInterval: 0)"
	switch {
	case supervisor != "":
		sup = fmt.Sprintf("supervisor: %s, every %d steps", uses(supervisor), cfg.SupervisorInterval)
	case cfg != nil && cfg.SupervisorInterval > 0:
		sup = "supervisor: off (no model)"
	}
	sum := "summarizer: off (summarizer: off)"
	switch {
	case summarizer != "":
		sum = "summarizer: " + uses(summarizer) + ", as each thread completes"
	case cfg != nil && cfg.Summarizer != registry.SummarizerOff:
		sum = "summarizer: off (no model)"
	}
	return sup + "; " + sum + "\n" +
		"  in workflow.yaml, models.supervisor and models.summarizer pick other models; supervisorInterval: 0 and summarizer: off turn them off\n"
}
