package cli

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/gc"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/storage"
)

func (a *app) casCmd() *cobra.Command {
	return group("cas", "Content-addressable storage:", "Read and write the content-addressed store",
		a.casGetCmd(),
		a.casPutCmd(),
		a.casListCmd(),
		a.casRmCmd(),
		a.casGCCmd(),
	)
}

func (a *app) store() (storage.Layout, *cas.Store, error) {
	l, err := a.layout()
	if err != nil {
		return l, nil, err
	}
	return l, cas.Open(l.CASDir()), nil
}

// casEntryError turns a store error into the CLI's wording.
func casEntryError(hash string, err error) error {
	if errors.Is(err, cas.ErrNotFound) {
		return fmt.Errorf("cas entry not found: %s", hash)
	}
	return err
}

func (a *app) casGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get <hash>",
		Short: "Retrieve content by hash from CAS",
		Args:  exactArgs(1, 1, "cas get requires <hash>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, s, err := a.store()
			if err != nil {
				return err
			}
			h, err := ids.ParseHash(args[0])
			if err != nil {
				return err
			}
			b, err := s.Get(h)
			if err != nil {
				return casEntryError(h, err)
			}
			if asJSON {
				return writeJSON(a.out(), map[string]string{"hash": h, "content": string(b)})
			}
			_, err = a.out().Write(b)
			return err
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

func (a *app) casPutCmd() *cobra.Command {
	var content []string
	return &cobra.Command{
		Use:   "put <content>",
		Short: "Store content in CAS, prints hash",
		Long: `Stores <content> as a content node and prints its hash. Content is taken as
written, a leading '-' included ("cas put '- item'"); only this command's
flags are read as flags, and "--" ends them ("cas put -- --help" stores
"--help").`,
		DisableFlagParsing: true, // contentArgs reads the command line
		Args:               contentArgs(&content, exactArgs(1, 1, "cas put requires <content>", "")),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, s, err := a.store()
			if err != nil {
				return err
			}
			h, err := s.Put(content[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(a.out(), h)
			return nil
		},
	}
}

func (a *app) casListCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List all hashes in CAS",
		Args:  exactArgs(0, 0, "", "cas list takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			_, s, err := a.store()
			if err != nil {
				return err
			}
			hashes, err := s.List()
			if err != nil {
				return err
			}
			sort.Strings(hashes)
			hashes = api.Window(hashes, lf.offset, lf.limit)
			if lf.json {
				if hashes == nil {
					hashes = []string{}
				}
				return writeJSON(a.out(), map[string][]string{"hashes": hashes})
			}
			for _, h := range hashes {
				fmt.Fprintln(a.out(), h)
			}
			return nil
		},
	}
	lf.register(cmd)
	return cmd
}

func (a *app) casRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm <hash>",
		Short: "Remove a CAS entry by hash",
		Args:  exactArgs(1, 1, "cas rm requires <hash>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, s, err := a.store()
			if err != nil {
				return err
			}
			h, err := ids.ParseHash(args[0])
			if err != nil {
				return err
			}
			ok, err := s.Exists(h)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("cas entry not found: %s", h)
			}
			// Never a blob a thread reaches: the same judgement as cas gc.
			opts := a.gcOptions(l)
			deleted, err := gc.RemoveBlob(cmd.Context(), l, s, h, opts)
			if err != nil {
				return withDoctorHint(err)
			}
			if !deleted {
				return fmt.Errorf("cas entry %s was not removed: it was stored less than %s ago while an engine host runs, and a running step may be about to link it; try again later", h, minutes(opts.Grace))
			}
			fmt.Fprintf(a.out(), "removed cas entry %s\n", h)
			return nil
		},
	}
}

func (a *app) casGCCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Garbage-collect unreferenced CAS entries",
		Long: fmt.Sprintf(`Deletes every entry no thread can reach. While an engine host runs on the
storage root, unreferenced blobs younger than %s are spared: a running
thread stores a step's content a moment before it links it. gc says how many
it spared; a later gc takes them once they are older, or when no host runs.`, minutes(gcGraceWhileRunning)),
		Args: exactArgs(0, 0, "", "gc takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.collect()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.out(), res)
			}
			fmt.Fprintln(a.out(), res.String())
			if res.SparedEntries > 0 {
				fmt.Fprintf(a.out(), "spared %s younger than %s: an engine host is running, and a running thread stores a step's content a moment before it links it; a later gc takes them once they are older, or when no host runs\n",
					plural(res.SparedEntries, "unreferenced blob"), minutes(gcGraceWhileRunning))
			}
			return nil
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// collect runs GC with a status line on a terminal; Ctrl-C stops it before
// the sweep deletes anything further.
func (a *app) collect() (gc.Result, error) {
	l, s, err := a.store()
	if err != nil {
		return gc.Result{}, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	status := a.statusLine()
	defer status.done()
	opts := a.gcOptions(l)
	opts.Progress = func(p gc.Phase, n int) {
		switch p {
		case gc.PhaseRoots:
			status.show("gc: %d roots", n)
		case gc.PhaseMark:
			status.show("gc: marked %d reachable blobs", n)
		case gc.PhaseSweep:
			status.show("gc: swept %d blobs", n)
		}
	}
	res, err := gc.Collect(ctx, l, s, opts)
	return res, withDoctorHint(err)
}

// gcOptions are the options of every collection the CLI runs.
func (a *app) gcOptions(l storage.Layout) gc.Options {
	opts := gc.Options{}
	if host.Running(l) {
		// A running engine may have stored content it has not linked yet.
		opts.Grace = gcGraceWhileRunning
	}
	return opts
}

// gcGraceWhileRunning spares young unreachable blobs while an engine host
// runs threads on the root.
const gcGraceWhileRunning = 10 * time.Minute

// minutes writes a whole number of minutes in words ("10 minutes").
func minutes(d time.Duration) string { return plural(int(d/time.Minute), "minute") }
