// Package storage knows where things live under a storage root. The layout is
// the one the original TypeScript engine writes, so a root can be shared by
// both:
//
//	workflow.yaml                             registry
//	bundles/<hash>.esm.js, <hash>.yaml        bundle and its descriptor
//	bundles/<hash>.workflow.yaml              a YAML workflow (instead of .esm.js)
//	bundles/<hash>/threads.json               active threads
//	bundles/<hash>/history/YYYY-MM-DD.jsonl   finished threads
//	cas/<hash>.txt                            content-addressed nodes
//	logs/<hash>/<thread>.info.jsonl           debug log
//	logs/<hash>/<thread>.running              a worker runs the thread (empty)
//	workers/<hash>.json                       the original's worker of a bundle
//	engine.idempotency/<sha256>.json          this engine's idempotency keys (the original ignores it)
//
// Every path taking a hash or thread id expects a value already validated by
// package ids; Layout does not re-check them.
package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/uncaged/workflow/engine/ids"
)

// Environment variables naming the storage root, highest priority first.
const (
	EnvRoot       = "UNCAGED_WORKFLOW_STORAGE_ROOT"
	EnvLegacyRoot = "WORKFLOW_STORAGE_ROOT"
)

// ResolveRoot picks the storage root: UNCAGED_WORKFLOW_STORAGE_ROOT, then
// WORKFLOW_STORAGE_ROOT (empty values are skipped), then ~/.uncaged/workflow.
// getenv is os.Getenv in production and a map lookup in tests.
func ResolveRoot(getenv func(string) string) (string, error) {
	for _, name := range []string{EnvRoot, EnvLegacyRoot} {
		if v := getenv(name); v != "" {
			return filepath.Abs(v)
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("cannot find the home directory for the default storage root; set " + EnvRoot)
	}
	return DefaultRoot(home), nil
}

// DefaultRoot is the storage root used when no variable names one.
func DefaultRoot(home string) string {
	return filepath.Join(home, ".uncaged", "workflow")
}

// Layout resolves paths under one storage root.
type Layout struct {
	Root string
}

// EnsureRoot creates the storage root when it is missing, open to its owner
// only (0700, whatever the umask): it holds every prompt, model answer and
// agent output, and other users of the machine have no business reading
// them. A root that exists keeps the mode its owner gave it, which Check
// judges; Open does both.
func (l Layout) EnsureRoot() error {
	if _, err := os.Stat(l.Root); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(l.Root, 0o700); err != nil {
		return fmt.Errorf("create the storage root: %w", err)
	}
	// The umask can only take bits away, but an odd one (0100) would take
	// the owner's own.
	if err := os.Chmod(l.Root, 0o700); err != nil {
		return fmt.Errorf("create the storage root: %w", err)
	}
	return nil
}

// RegistryFile is workflow.yaml.
func (l Layout) RegistryFile() string { return filepath.Join(l.Root, "workflow.yaml") }

// CASDir holds one file per content-addressed node.
func (l Layout) CASDir() string { return filepath.Join(l.Root, "cas") }

// BundlesDir holds bundle files and one directory per bundle hash.
func (l Layout) BundlesDir() string { return filepath.Join(l.Root, "bundles") }

// BundleFile is the stored copy of a registered bundle.
func (l Layout) BundleFile(hash string) string {
	return filepath.Join(l.BundlesDir(), hash+".esm.js")
}

// YAMLWorkflowFile is the stored copy of a registered YAML workflow. Its
// name differs from DescriptorFile's <hash>.yaml, which every workflow has.
func (l Layout) YAMLWorkflowFile(hash string) string {
	return filepath.Join(l.BundlesDir(), hash+".workflow.yaml")
}

// HasBundle reports whether the workflow hash is stored in the root, as a
// JavaScript bundle or a YAML workflow. hash may come from workflow.yaml,
// which anyone can edit, so it is validated here before it becomes a path.
func (l Layout) HasBundle(hash string) bool {
	h, err := ids.ParseHash(hash)
	if err != nil {
		return false
	}
	for _, p := range []string{l.BundleFile(h), l.YAMLWorkflowFile(h)} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// DescriptorFile is the descriptor sidecar of a bundle.
func (l Layout) DescriptorFile(hash string) string {
	return filepath.Join(l.BundlesDir(), hash+".yaml")
}

// TypesFile is the optional .d.ts companion of a bundle.
func (l Layout) TypesFile(hash string) string {
	return filepath.Join(l.BundlesDir(), hash+".d.ts")
}

// BundleDir holds the thread index and history of one bundle.
func (l Layout) BundleDir(hash string) string { return filepath.Join(l.BundlesDir(), hash) }

// LogsDir holds the debug logs of one bundle's threads.
func (l Layout) LogsDir(hash string) string { return filepath.Join(l.Root, "logs", hash) }

// InfoLog is a thread's debug log.
func (l Layout) InfoLog(hash, threadID string) string {
	return filepath.Join(l.LogsDir(hash), threadID+".info.jsonl")
}

// RunningMarker is the original's marker for a thread a worker is
// executing: an empty file. This engine's host writes it too while it runs
// a thread, so that the original sees the thread as running.
func (l Layout) RunningMarker(hash, threadID string) string {
	return filepath.Join(l.LogsDir(hash), threadID+".running")
}

// QuestionFile is this engine's record of the question a thread waits on
// (package questions): it names the question node, and the answer once
// given. The original never writes one and ignores it.
func (l Layout) QuestionFile(hash, threadID string) string {
	return filepath.Join(l.LogsDir(hash), threadID+".question.json")
}

// WorkerFile is the original's record of the worker process that runs a
// bundle's threads: {"pid":N,"port":N}, the port its control socket
// listens on. This engine never writes one.
func (l Layout) WorkerFile(hash string) string {
	return filepath.Join(l.Root, "workers", hash+".json")
}

// IdempotencyDir holds this engine's record of each idempotency key a
// thread was started with (package host), so that a run sent twice starts
// one thread. The original never reads it.
func (l Layout) IdempotencyDir() string { return filepath.Join(l.Root, "engine.idempotency") }

// IdempotencyFile is the record of one idempotency key. It is named by the
// key's SHA-256, not by the key: a key is the sender's text, and its hash
// is a file name whatever the key holds.
func (l Layout) IdempotencyFile(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(l.IdempotencyDir(), hex.EncodeToString(sum[:])+".json")
}
