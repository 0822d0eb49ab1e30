package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/gctune"
)

// backgroundIdleExit is how long a host started on demand by a command
// stays up with nothing to run.
const backgroundIdleExit = 30 * time.Second

// engineClient connects to the root's engine host, starting one in the
// background when none runs, so threads outlive this command. The threads
// it runs, forks and resumes get cmd's environment and working directory,
// whichever command started the host.
func (a *app) engineClient(l storage.Layout, cmd *cobra.Command) (*host.Client, error) {
	c, err := host.Ensure(l, spawnEngine(l))
	if err != nil {
		return nil, err
	}
	c.SetCaller(commandCaller(cmd))
	return c, nil
}

// commandCaller is cmd as the caller of a thread: this process's
// environment (os.Environ, not Env.Getenv: a thread needs the whole of
// it, and the CLI's own variables have already been applied to its flags)
// and working directory.
func commandCaller(cmd *cobra.Command) func() *host.Caller {
	return func() *host.Caller { return host.CommandCaller(cmd.CommandPath()) }
}

// engineStopWait bounds how long stop waits for the host to be gone: a
// forced stop waits for its threads' agents to be killed.
const engineStopWait = 30 * time.Second

// stopEngine stops l's host, if one runs, and waits until it is gone. It
// reports whether one ran and the threads a forced stop interrupted.
func (a *app) stopEngine(l storage.Layout, force bool) (bool, []host.RunningThread, error) {
	c, err := host.Dial(l)
	if errors.Is(err, host.ErrRefused) {
		return false, nil, err // a host runs, but not for this user
	}
	if err != nil {
		return false, nil, nil
	}
	defer c.Close()
	if !force {
		list, err := c.List()
		if err != nil {
			return true, nil, err
		}
		if len(list) > 0 {
			ids := make([]string, len(list))
			for i, r := range list {
				ids[i] = r.ThreadID + " (" + string(r.Status) + ")"
			}
			return true, nil, fmt.Errorf("the engine host runs %d thread(s): %s; pass --force to stop them where they are "+
				"(each stays resumable with `uncaged-workflow thread resume <id>`), or let them finish", len(list), strings.Join(ids, ", "))
		}
	}
	ans, err := c.Stop(force)
	if err != nil {
		return true, nil, err
	}
	if err := host.WaitStopped(l, engineStopWait); err != nil {
		return true, ans.Stopped, err
	}
	fmt.Fprintf(a.out(), "engine host pid %d stopped\n", ans.PID)
	return true, ans.Stopped, nil
}

// spawnEngine starts `engine serve` for l in the background, with extra
// flags of its own. The root goes on its command line: it may have come
// from this process's --storage-root rather than from a variable the
// child would inherit.
func spawnEngine(l storage.Layout, extra ...string) func() error {
	args := append([]string{"engine", "serve", "--idle-exit", backgroundIdleExit.String(), "--" + storageRootFlag, l.Root}, extra...)
	return host.SpawnSelf(l, args...)
}

// sightThreads asks a running host what it executes, before the thread
// records to judge are read (host.Sighting); with no host, or one that
// does not answer, nothing is running.
func sightThreads(l storage.Layout) *host.Sighting {
	return host.Sight(func() (map[string]host.RunningThread, error) {
		c, err := host.Dial(l)
		if err != nil {
			return nil, nil
		}
		defer c.Close()
		running, _ := c.Running()
		return running, nil
	})
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
	var stopForce, restartForce bool
	stop := &cobra.Command{
		Use:   "stop [--force]",
		Short: "Stop the engine host for this storage root",
		Long: "Asks the root's engine host to shut down and waits until it is gone. With threads\n" +
			"running (or paused) it refuses and names them, unless --force: then they stop where\n" +
			"they are, are listed, and stay resumable: `thread resume <id>` continues each from\n" +
			"its last completed step (the step in flight runs again). A thread started after the\n" +
			"host agreed to stop is refused. No engine host running is not an error (exit 0).",
		Args: exactArgs(0, 0, "", "stop takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.lookLayout()
			if err != nil {
				return err
			}
			ran, stopped, err := a.stopEngine(l, stopForce)
			if err != nil {
				return err
			}
			if !ran {
				fmt.Fprintln(a.out(), "no engine host running for "+l.Root)
			}
			for _, r := range stopped {
				if r.Parent != "" {
					fmt.Fprintf(a.out(), "thread %s stopped; a child of %s, it runs again when that one is resumed\n", r.ThreadID, r.Parent)
					continue
				}
				fmt.Fprintf(a.out(), "thread %s stopped; resume it with `uncaged-workflow thread resume %s`\n", r.ThreadID, r.ThreadID)
			}
			return nil
		},
	}
	stop.Flags().BoolVar(&stopForce, "force", false, "stop even with threads running; they stay resumable")
	restart := &cobra.Command{
		Use:   "restart [--force]",
		Short: "Stop the engine host and start a new one in the background",
		Long: "Stops the root's engine host as `engine stop` does (refusing while threads run,\n" +
			"unless --force) and starts a new one in the background. With --force, the threads\n" +
			"that were running go on in the new host from their last completed step, with this\n" +
			"command's environment; paused ones stay stopped until `thread resume <id>`.",
		Args: exactArgs(0, 0, "", "restart takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.layout()
			if err != nil {
				return err
			}
			_, stopped, err := a.stopEngine(l, restartForce)
			if err != nil {
				return err
			}
			c, err := a.engineClient(l, cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.Status()
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "engine host pid %d started for %s\n", s.PID, s.Root)
			for _, r := range stopped {
				switch {
				case r.Parent != "":
					// Its parent's role runs it again when the parent goes on.
				case r.Status == threads.StatusPaused:
					fmt.Fprintf(a.out(), "thread %s was paused: resume it with `uncaged-workflow thread resume %s`\n", r.ThreadID, r.ThreadID)
				default:
					if err := c.Resume(r.ThreadID); err != nil {
						return fmt.Errorf("resume thread %s: %w", r.ThreadID, err)
					}
					fmt.Fprintf(a.out(), "thread %s resumed\n", r.ThreadID)
				}
			}
			return nil
		},
	}
	restart.Flags().BoolVar(&restartForce, "force", false, "restart even with threads running, and resume them in the new host")
	return group("engine", "Engine:", "Run, inspect, stop and restart the engine host", serve, status, stop, restart)
}
