package jsrt

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/uncaged/workflow/engine/threadenv"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// envFakeHost is a fakeHost that carries a thread environment, as the
// executor's run does.
type envFakeHost struct {
	*fakeHost
	env *threadenv.Env
}

func (h envFakeHost) ThreadEnv() *threadenv.Env { return h.env }
func (h envFakeHost) Getenv(name string) string { return h.env.Getenv(name) }

const threadEnvBundle = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";

const definition = {
  description: "Reports its environment.",
  roles: { r: { description: "reports", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "r" }], r: [{ condition: "FALLBACK", role: END }] },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async () => {
    const child = spawnSync("thread-sh", ["-c", 'printf "%s|%s" "$(pwd -P)" "$THREAD_K"'], { encoding: "utf8" });
    return {
      meta: {
        cwd: process.cwd(),
        keys: Object.keys(process.env).join(","),
        k: process.env.THREAD_K,
        child: String(child.stdout),
        error: String(child.error || ""),
        read: fs.readFileSync("note.txt", "utf8"),
        home: os.homedir(),
        tmp: os.tmpdir(),
      },
      childThread: null,
    };
  },
  overrides: null,
});
`

// TestABundleSeesTheThreadsEnvironment: process.env, process.cwd(), a
// relative path, os.homedir() and os.tmpdir(), and a child process started
// without options are the thread's, and the child is found on the
// thread's PATH.
func TestABundleSeesTheThreadsEnvironment(t *testing.T) {
	t.Parallel()
	bin, dir := t.TempDir(), t.TempDir()
	// A link, not a copy: a written executable could be busy (ETXTBSY)
	// while parallel tests fork.
	if err := os.Symlink("/bin/sh", filepath.Join(bin, "thread-sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("in the thread's directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Load([]byte(threadEnvBundle), "env.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := envFakeHost{newFakeHost(t), threadenv.New([]string{"PATH=" + bin, "THREAD_K=from-thread", "HOME=/thread/home", "TMPDIR=/thread/tmp"}, dir, "that of a test")}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	r, err := b.Start(ctx, threadFor(b, "go"), workflow.Host(h))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	out, _, err := r.Next(ctx)
	if err != nil || out == nil {
		t.Fatalf("Next: %v, %v", out, err)
	}
	meta := map[string]any{}
	for _, kv := range out.Meta {
		meta[kv.Key] = kv.Value
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"cwd": dir, "keys": "HOME,PATH,THREAD_K,TMPDIR", "k": "from-thread",
		"read": "in the thread's directory", "home": "/thread/home", "tmp": "/thread/tmp",
		"child": realDir + "|from-thread", "error": "",
	} {
		if meta[key] != want {
			t.Errorf("%s = %v, want %q", key, meta[key], want)
		}
	}
}
