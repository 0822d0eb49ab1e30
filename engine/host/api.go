// Package host is the engine host: the one process per storage root that
// executes threads. It holds a lock file so no second host runs on the same
// root, serves a small control API (HTTP over a Unix socket in the root) for
// the CLI commands that act on threads, and runs each thread in its own
// goroutine so threads outlive the command that started them. It tells of
// each change to its threads as it happens, in its process and on the
// socket (changes.go), so that readers need not poll.
package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// RunRequest starts a thread of a registered workflow.
type RunRequest struct {
	Workflow string `json:"workflow"`
	Prompt   string `json:"prompt"`
	// Caller is whose environment the thread runs with (nil: the host's
	// own). A Client with a caller fills it in.
	Caller *Caller `json:"caller,omitempty"`
	// IdempotencyKey, when set, makes the run start at most one thread
	// for the key (CheckIdempotencyKey says which keys are valid): a run
	// with a key that already started a thread answers that thread and
	// starts nothing (idempotency.go).
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ForkRequest forks a thread; FromRole "" retries the last role.
type ForkRequest struct {
	FromRole string `json:"fromRole"`
	// Step, when set, forks at that role step instead (1-based, as the
	// thread's records list its steps; see executor.PrepareForkAt): a role
	// that ran twice can be forked from its second run. Not with FromRole.
	Step   int     `json:"step,omitempty"`
	Caller *Caller `json:"caller,omitempty"`
}

// ResumeRequest resumes a thread: an interrupted one starts again, and a
// paused one goes on, with the caller's environment from then on.
type ResumeRequest struct {
	Caller *Caller `json:"caller,omitempty"`
}

// KillRequest kills a thread. By, when set, names who asks, for the
// thread's summary ("killed during step 4 (role reviewer) by …").
type KillRequest struct {
	By string `json:"by,omitempty"`
}

// Caller is the command that asks for a thread to run: its environment
// and working directory become the thread's (package threadenv). They
// travel only over the owner-only socket, are kept in memory only, and
// are never logged: the environment holds the caller's keys.
type Caller struct {
	// Env is the caller's environment, "NAME=value" entries.
	Env []string `json:"env"`
	// Dir is the caller's working directory (absolute; "": the host's).
	Dir string `json:"dir,omitempty"`
	// Origin completes "the thread's environment is …" in messages, e.g.
	// "that of `uncaged-workflow run` in /home/me, pid 4242".
	Origin string `json:"origin,omitempty"`
	// Requester names the command for a killed thread's summary, e.g.
	// "`uncaged-workflow thread kill` (pid 4242)": a Client sends it with
	// its kills (KillRequest.By). Not sent with runs, forks and resumes,
	// whose requests hosts older than it refuse with unknown fields.
	Requester string `json:"-"`
}

// CommandCaller is the Caller of a command of this process: its whole
// environment, its working directory, and an origin naming the command
// (e.g. "uncaged-workflow run"), the directory and the pid.
func CommandCaller(command string) *Caller {
	dir, err := os.Getwd()
	if err != nil {
		dir = "" // a deleted directory: the thread gets the host's
	}
	where := ""
	if dir != "" {
		where = " in " + dir
	}
	return &Caller{
		Env: os.Environ(), Dir: dir, Origin: fmt.Sprintf("that of `%s`%s, pid %d", command, where, os.Getpid()),
		Requester: fmt.Sprintf("`%s` (pid %d)", command, os.Getpid()),
	}
}

// StopRequest asks the host to shut down. Without Force a host with
// threads running refuses; with it, they are stopped where they are and
// stay resumable (`resume` continues each from its last step).
type StopRequest struct {
	Force bool `json:"force"`
}

// StopAnswer is what a host that agreed to stop answers: its pid, and the
// threads it stopped (with Force), which a restart may resume.
type StopAnswer struct {
	PID     int             `json:"pid"`
	Stopped []RunningThread `json:"stopped"`
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
	Status     threads.Status `json:"status"` // running, pausing or paused
	StartedAt  int64          `json:"startedAt"`
	Depth      int            `json:"depth"`
	Parent     string         `json:"parent,omitempty"` // parent thread id of a child
	// Starting is set while the host writes a new thread's first records:
	// it runs the thread, whose line is not in the index yet, so a list of
	// running threads to look up leaves it out.
	Starting bool `json:"starting,omitempty"`
}

// ByThread keys a list of running threads by thread id.
func ByThread(list []RunningThread) map[string]RunningThread {
	out := make(map[string]RunningThread, len(list))
	for _, r := range list {
		out[r.ThreadID] = r
	}
	return out
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

// codedAPIError is apiError with a code naming the error for a Client to
// match (keyErrors); every other error has none.
type codedAPIError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// LockFile guards a root against a second host.
func LockFile(l storage.Layout) string { return filepath.Join(l.Root, "engine.lock") }

// SocketPath is where the host listens. Unix socket paths are limited to
// about 107 bytes, so a deep root gets its socket, named by a hash of the
// root, in a directory private to the user (socketDir) instead.
func SocketPath(l storage.Layout) string {
	p := filepath.Join(l.Root, "engine.sock")
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(l.Root))
	return filepath.Join(socketDir(), hex.EncodeToString(sum[:8])+".sock")
}

// socketDir is $XDG_RUNTIME_DIR/uncaged-workflow when the session has a
// runtime directory, else uncaged-workflow-<uid> in the temp directory.
func socketDir() string {
	if run := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(run) {
		return filepath.Join(run, "uncaged-workflow")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("uncaged-workflow-%d", os.Getuid()))
}

// AgentsDir holds a record of each process group the host's agents run
// in (package procgroup), so that the next host kills what a dead one
// left running.
func AgentsDir(l storage.Layout) string { return filepath.Join(l.Root, "engine.agents") }

// LogFile is where a background host writes its own log.
func LogFile(l storage.Layout) string { return filepath.Join(l.Root, "logs", "engine.log") }
