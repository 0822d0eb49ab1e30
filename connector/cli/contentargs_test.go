package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// startHost runs an engine host for c's root in this process (the CLI's
// own would start this test binary), stopped when the test ends.
func startHost(t *testing.T, c *cli) {
	t.Helper()
	l := storage.Layout{Root: c.root}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	load := (&app{env: Env{Getenv: func(k string) string { return c.env[k] }}}).workflowLoader(l)
	serveHost(t, host.Options{Layout: l, Load: load, Getenv: os.Getenv})
}

// serveHost runs an engine host with opts until the test ends, once it
// answers on its socket.
func serveHost(t *testing.T, opts host.Options) *host.Host {
	t.Helper()
	h, err := host.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine host: %v", err)
		}
	})
	testkit.WaitUntil(t, "the host answers", func() bool {
		cl, err := host.Dial(opts.Layout)
		if err == nil {
			cl.Close()
		}
		return err == nil
	})
	return h
}

// addYAML registers a YAML workflow written to a file of its own.
func addYAML(t *testing.T, c *cli, name, content string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("workflow", "add", name, file)
}

// promptOf is the prompt a thread was started with.
func promptOf(t *testing.T, c *cli, id string) string {
	t.Helper()
	l := storage.Layout{Root: c.root}
	var rec threads.Record
	testkit.WaitUntil(t, "thread "+id+" in the index", func() bool {
		var err error
		rec, err = threads.Resolve(l, id)
		return err == nil
	})
	store := cas.Open(l.CASDir())
	n, err := store.GetNode(rec.Start)
	if err != nil {
		t.Fatal(err)
	}
	start, ok := n.(node.Start)
	if !ok || len(start.Refs) == 0 {
		t.Fatalf("start node of %s: %#v", id, n)
	}
	text, ok := threads.ContentPayload(store, start.Refs[0])
	if !ok {
		t.Fatalf("prompt of %s not in the CAS", id)
	}
	return text
}

const echoYAML = `version: 1
description: Echo
agent: {type: exec, command: /bin/sh, args: [-c, "echo '{}'"]}
roles:
  only: {description: Does it, prompt: Do it.}
graph: {__start__: only}
`

// Content that starts with '-' is content, wherever a command takes free
// text: cas put's argument and the prompt of run and thread run, with the
// root's flags before or after it.
func TestContentStartingWithADashIsContent(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	addYAML(t, c, "echo", echoYAML)
	startHost(t, c)
	contents := []string{"-x", "--y", "- dash", "-", "--", "--storage-root", "-h x", "--prompt"}
	type command struct {
		name string
		args func(content string) []string
	}
	commands := []command{
		{"cas put", func(s string) []string { return []string{"cas", "put", s} }},
		{"cas put after a flag", func(s string) []string {
			return []string{"--log-level", "info", "cas", "put", "--storage-root", c.root, s}
		}},
		{"cas put after --", func(s string) []string { return []string{"cas", "put", "--", s} }},
		{"run --prompt", func(s string) []string { return []string{"run", "echo", "--prompt", s} }},
		{"run --prompt=", func(s string) []string { return []string{"run", "echo", "--prompt=" + s} }},
		{"thread run --prompt", func(s string) []string {
			return []string{"thread", "run", "echo", "--storage-root", c.root, "--prompt", s}
		}},
	}
	for _, cmd := range commands {
		for _, content := range contents {
			if content == "--storage-root" && (cmd.name == "cas put" || cmd.name == "cas put after a flag") {
				continue // a flag cas put has is its flag (see below); after --, content
			}
			out, errs, code := c.run(cmd.args(content)...)
			if code != 0 {
				t.Errorf("%s %q: exit %d\n%s", cmd.name, content, code, errs)
				continue
			}
			got := strings.TrimSpace(out)
			if strings.HasPrefix(cmd.name, "cas put") {
				if text, ok := threads.ContentPayload(cas.Open(storage.Layout{Root: c.root}.CASDir()), got); !ok || text != content {
					t.Errorf("%s %q stored %q as %q", cmd.name, content, text, got)
				}
				continue
			}
			if p := promptOf(t, c, got); p != content {
				t.Errorf("%s %q: the thread's prompt is %q", cmd.name, content, p)
			}
		}
	}
	// Flags after the content still count, and a flag the command has is a
	// flag: --storage-root alone lacks its value, -h and --help ask for help.
	if got := c.ok("cas", "put", "- dash", "--storage-root", c.root); got != "7J4NC2CZN3S3W\n" {
		t.Errorf("cas put \"- dash\" = %q, want the original's hash 7J4NC2CZN3S3W", got)
	}
	c.fails("flag needs an argument: --storage-root", "cas", "put", "--storage-root")
	for _, help := range []string{"-h", "--help"} {
		if out := c.ok("cas", "put", help); !strings.Contains(out, "usage: uncaged-workflow cas put <content>") {
			t.Errorf("cas put %s:\n%s", help, out)
		}
	}
	c.fails("cas put requires <content>", "cas", "put")
	c.fails("too many arguments", "cas", "put", "-x", "-y")
	c.fails("too many arguments", "cas", "put", "--", "-x", "-y")
	c.fails("too many arguments (--storage-rot is not a flag here: did you mean --storage-root?)", "cas", "put", "--storage-rot", c.root, "x")
}
