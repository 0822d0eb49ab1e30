package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PrivateHome gives this process, and every process it starts from now
// on, a home directory of its own (HOME and the XDG directories under a
// new temporary directory, which it returns for the caller to remove), so
// that nothing a test or a benchmark runs reads or writes the home of
// whoever runs it: a gateway's record of itself under ~/.uncaged/run, a
// default data directory, a user service's unit. Go's own directories
// stay where they are, so a build made meanwhile reuses the cache.
func PrivateHome(prefix string) (string, error) {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	dirs := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(dirs) != 3 {
		return "", fmt.Errorf("go env: %q", out)
	}
	home, err := os.MkdirTemp("", prefix+"-home-")
	if err != nil {
		return "", err
	}
	for k, v := range map[string]string{
		"GOCACHE": dirs[0], "GOMODCACHE": dirs[1], "GOPATH": dirs[2], "HOME": home,
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"), "XDG_DATA_HOME": filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME": filepath.Join(home, ".cache"), "XDG_STATE_HOME": filepath.Join(home, ".local", "state"),
	} {
		if err := os.Setenv(k, v); err != nil {
			return "", err
		}
	}
	return home, nil
}

// PrivateHomeFor is PrivateHome for a benchmark harness's main or a
// TestMain: it exits the process when the home cannot be made, and
// returns what removes it.
func PrivateHomeFor(who string) (remove func()) {
	home, err := PrivateHome(who)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: making a home of its own: %v\n", who, err)
		os.Exit(1)
	}
	return func() { _ = os.RemoveAll(home) } // a temporary directory: nothing in it is wanted
}
