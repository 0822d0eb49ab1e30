package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/gateway/store"
)

// The gateways running on this machine, as this user, each leave a record
// in runningDir, so that a token command that uses another database can
// name the one they use (a gateway started with --data-dir X, a token
// command that defaulted to ~/.uncaged/gateway). Each `serve` writes one
// file, named after its pid and start, and holds a lock (flock) on it for
// as long as it runs. The kernel drops the lock with the process, so a
// record whose lock is free is from a gateway that has stopped, crashed
// or was killed, whatever pid it names: readers skip it, and the next
// serve removes it.

// runningGateway is one running gateway's record.
type runningGateway struct {
	PID    int    `json:"pid"`
	Listen string `json:"listen"`
	// DataDir is the SQLite database's directory, absolute; Database the
	// PostgreSQL URL without its password. One of the two.
	DataDir  string    `json:"dataDir,omitempty"`
	Database string    `json:"database,omitempty"`
	Since    time.Time `json:"since"`
}

// runningDir is where the records are: ~/.uncaged/run/gateways.
func runningDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".uncaged", "run", "gateways"), nil
}

// recordRunning records this process as a gateway using cfg's database,
// listening on listen, until release is called (or the process ends). The
// record is locked before it is renamed into place, so no reader ever
// sees a live gateway's record unlocked.
func recordRunning(cfg store.Config, listen string) (release func(), err error) {
	dir, err := runningDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sweepStopped(dir)
	rec := runningGateway{PID: os.Getpid(), Listen: listen, Since: time.Now().UTC()}
	if cfg.DatabaseURL != "" {
		rec.Database = withoutPassword(cfg.DatabaseURL)
	} else if rec.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (func(), error) {
		_ = os.Remove(f.Name())
		_ = f.Close() // dropped with the file
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%d-%d.json", rec.PID, rec.Since.UnixNano()))
	if err := os.Rename(f.Name(), path); err != nil {
		return fail(err)
	}
	return func() {
		_ = os.Remove(path)
		_ = f.Close() // drops the lock; nothing left to write
	}, nil
}

// sweepStopped removes the records of gateways that stopped without
// removing theirs. A record is only removed while this process holds its
// lock, which a live gateway never lets go of: names are never reused, so
// the path cannot be another gateway's by then.
func sweepStopped(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			// A record being written is unlocked for a moment; one left
			// half-written by a crash is old.
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < time.Minute {
				continue
			}
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.Remove(path) // best effort: the next serve tries again
		}
		_ = f.Close() // read only; drops the lock
	}
}

// runningGateways are the records of the gateways running on this machine
// as this user; a missing directory is none.
func runningGateways() ([]runningGateway, error) {
	dir, err := runningDir()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []runningGateway
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if rec, ok := readRunning(filepath.Join(dir, e.Name())); ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

// readRunning reads the record at path when its gateway still runs.
func readRunning(path string) (runningGateway, bool) {
	var rec runningGateway
	f, err := os.Open(path)
	if err != nil {
		return rec, false
	}
	defer func() { _ = f.Close() }() // read only
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		return rec, false // nobody holds it: its gateway has stopped
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return rec, false
	}
	return rec, true
}

// withoutPassword is a database URL fit to be shown: its password left
// out.
func withoutPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "a PostgreSQL database (its URL does not parse)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	u.RawQuery = "" // may hold a password too
	return u.String()
}

// elsewhere says which databases the gateways running on this machine use,
// when none uses the one a token command used, and how to point the
// command at each.
func elsewhere(gateways []runningGateway) string {
	if len(gateways) == 0 {
		return "  no gateway runs on this machine as this user; if yours runs elsewhere, point this command at its database: " +
			"--data-dir DIR (or " + envName("data-dir") + ") for SQLite, --database-url-file FILE or --database-url URL (or " + envName("database-url") + ") for PostgreSQL\n"
	}
	var b strings.Builder
	for _, g := range gateways {
		who := fmt.Sprintf("the gateway running here as pid %d (--listen %s, since %s)", g.PID, g.Listen, g.Since.UTC().Format(time.RFC3339))
		if g.DataDir != "" {
			fmt.Fprintf(&b, "  %s uses --data-dir %s: to change its tokens, pass --data-dir %s (or set %s=%s)\n", who, g.DataDir, g.DataDir, envName("data-dir"), g.DataDir)
		} else {
			fmt.Fprintf(&b, "  %s uses PostgreSQL %s: to change its tokens, pass that database's --database-url-file or --database-url (or set %s)\n", who, g.Database, envName("database-url"))
		}
	}
	return b.String()
}
