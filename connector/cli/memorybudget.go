package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/membudget"
)

// addMemoryBudgetFlag gives a command that hosts the engine its
// --memory-budget.
func addMemoryBudgetFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "memory-budget", "",
		"memory each thread's JavaScript may hold, for every thread this process hosts, over workflow.yaml's config.memoryBudget (e.g. 1GiB, or off; default "+membudget.FormatSize(membudget.DefaultBudget)+")")
}

// setupMemory applies --memory-budget and the host's memory limit before
// the host opens (membudget.SetupHost), and logs what is in force.
func setupMemory(flag string, logger *slog.Logger) error {
	s, err := membudget.SetupHost(flag)
	if err != nil {
		return err
	}
	budget := "workflow.yaml's config.memoryBudget, else " + membudget.FormatSize(membudget.DefaultBudget)
	if s.Budget == membudget.Off {
		budget = "off (--memory-budget)"
	} else if s.Budget > 0 {
		budget = membudget.FormatSize(s.Budget) + " (--memory-budget)"
	}
	limit := "none"
	if s.MemoryLimit > 0 {
		limit = membudget.FormatSize(s.MemoryLimit) + " (from " + s.Source + ")"
	}
	logger.Info("memory", "threadBudget", budget, "hostLimit", limit)
	return nil
}
