package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/gctune"
)

// backgroundIdleExit is how long a host started on demand by a command
// stays up with nothing to run.
const backgroundIdleExit = 30 * time.Second

// engineClient connects to the root's engine host, starting one in the
// background when none runs, so threads outlive this command.
func (a *app) engineClient(l storage.Layout) (*host.Client, error) {
	return host.Ensure(l, spawnEngine(l))
}

// spawnEngine starts `engine serve` for l in the background. The root goes
// on its command line: it may have come from this process's --storage-root
// rather than from a variable the child would inherit.
func spawnEngine(l storage.Layout) func() error {
	return host.SpawnSelf(l, "engine", "serve", "--idle-exit", backgroundIdleExit.String(), "--"+storageRootFlag, l.Root)
}

// runningThreads asks a running host what it executes; with no host,
// nothing is running.
func runningThreads(l storage.Layout) map[string]host.RunningThread {
	out := map[string]host.RunningThread{}
	c, err := host.Dial(l)
	if err != nil {
		return out
	}
	defer c.Close()
	list, err := c.List()
	if err != nil {
		return out
	}
	for _, r := range list {
		out[r.ThreadID] = r
	}
	return out
}

func (a *app) engineCmd() *cobra.Command {
	var maxThreads int
	var idle time.Duration
	var memoryBudget string
	serve := &cobra.Command{
		Use:   "serve [--max-threads N] [--idle-exit DURATION] [--memory-budget SIZE]",
		Short: "Run the engine host for this storage root in the foreground",
		Long: "Commands that act on threads start a host in the background when none runs;\n" +
			"run one yourself (e.g. under systemd) to keep it up and see its log.",
		Args: exactArgs(0, 0, "", "serve takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			gctune.Start()
			l, err := a.layout()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			logger := a.logger()
			if err := setupMemory(memoryBudget, logger); err != nil {
				return err
			}
			h, err := host.Open(host.Options{
				Layout: l, Load: a.workflowLoader(l), Getenv: os.Getenv,
				MaxThreads: maxThreads, IdleExit: idle, Logger: logger,
			})
			if err != nil {
				return err
			}
			return h.Serve(ctx)
		},
	}
	serve.Flags().IntVar(&maxThreads, "max-threads", host.DefaultMaxThreads, "threads that run at once; more wait their turn")
	serve.Flags().DurationVar(&idle, "idle-exit", 0, "exit after this long with nothing to run (0: never)")
	addMemoryBudgetFlag(serve, &memoryBudget)
	status := &cobra.Command{
		Use:   "status",
		Short: "Show whether an engine host runs for this storage root",
		Args:  exactArgs(0, 0, "", "status takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.layout()
			if err != nil {
				return err
			}
			c, err := host.Dial(l)
			if errors.Is(err, host.ErrRefused) {
				return err // a host runs, but not for this user
			}
			if err != nil {
				fmt.Fprintln(a.out(), "no engine host running for "+l.Root)
				return nil
			}
			s, err := c.Status()
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "engine host pid %d for %s: %d running (max %d), up since %s\n",
				s.PID, s.Root, s.Running, s.MaxThreads, time.UnixMilli(s.StartedAt).Format(time.RFC3339))
			return nil
		},
	}
	return group("engine", "Engine:", "Run and inspect the engine host", serve, status)
}
