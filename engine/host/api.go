// Package host is the engine host: the one process per storage root that
// executes threads. It holds a lock file so no second host runs on the same
// root, serves a small control API (HTTP over a Unix socket in the root) for
// the CLI commands that act on threads, and runs each thread in its own
// goroutine so threads outlive the command that started them.
package host

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// RunRequest starts a thread of a registered workflow.
type RunRequest struct {
	Workflow string `json:"workflow"`
	Prompt   string `json:"prompt"`
}

// ForkRequest forks a thread; FromRole "" retries the last role.
type ForkRequest struct {
	FromRole string `json:"fromRole"`
}

// ThreadRef answers run and fork.
type ThreadRef struct {
	ThreadID string `json:"threadId"`
}

// RunningThread is a thread the host is executing.
type RunningThread struct {
	ThreadID   string         `json:"threadId"`
	BundleHash string         `json:"bundleHash"`
	Workflow   string         `json:"workflow"`
	Status     threads.Status `json:"status"` // running or paused
	StartedAt  int64          `json:"startedAt"`
	Depth      int            `json:"depth"`
	Parent     string         `json:"parent,omitempty"` // parent thread id of a child
}

// Status describes the host.
type Status struct {
	PID        int    `json:"pid"`
	StartedAt  int64  `json:"startedAt"`
	Root       string `json:"root"`
	Running    int    `json:"running"`
	MaxThreads int    `json:"maxThreads"`
}

// apiError is the body of every failed request.
type apiError struct {
	Error string `json:"error"`
}

// LockFile guards a root against a second host.
func LockFile(l storage.Layout) string { return filepath.Join(l.Root, "engine.lock") }

// SocketPath is where the host listens. Unix socket paths are limited to
// about 107 bytes, so a deep root gets a socket in the temp directory named
// by a hash of the root instead.
func SocketPath(l storage.Layout) string {
	p := filepath.Join(l.Root, "engine.sock")
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(l.Root))
	return filepath.Join(os.TempDir(), "uncaged-workflow-"+hex.EncodeToString(sum[:8])+".sock")
}

// LogFile is where a background host writes its own log.
func LogFile(l storage.Layout) string { return filepath.Join(l.Root, "logs", "engine.log") }
