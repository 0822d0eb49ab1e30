package jsrt

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestNoGoroutineLeaks runs workflows that use timers, HTTP, child
// processes and kills, and checks that closing them leaves no goroutine
// behind.
func TestNoGoroutineLeaks(t *testing.T) {
	// Serial: counts the process's goroutines.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()

	// settle counts goroutines once the count holds still across a pause.
	settle := func() int {
		n := -1
		testkit.WaitUntil(t, "the goroutine count to settle", func() bool {
			runtime.GC()
			m := runtime.NumGoroutine()
			settled := m == n
			n = m
			return settled
		})
		return n
	}
	// Warm up package-level state (compiled modules) first.
	b := loadTestdata(t, "host_apis.esm.js")
	spin := loadTestdata(t, "spin.esm.js")
	baseline := settle()

	for _, name := range []string{"timers", "fetch", "spawn", "roundtrip"} {
		h := newFakeHost(t)
		h.env["TEST_SERVER"] = srv.URL
		wd, _ := os.Getwd()
		h.env["EXPECTED_CWD"] = wd
		if _, _, err := drive(t, b, h, threadFor(b, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Killed mid-step: a child process tree, then a spinning loop.
	for _, c := range []struct {
		bundle *Bundle
		prompt string
		warmup bool
	}{{b, "sleeper", false}, {spin, "spin", true}} {
		h := newFakeHost(t)
		r, err := c.bundle.Start(context.Background(), threadFor(c.bundle, c.prompt), h)
		if err != nil {
			t.Fatal(err)
		}
		if c.warmup {
			if _, _, err := r.Next(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, _, err = r.Next(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%s: Next succeeded", c.prompt)
		}
		_ = r.Close()
	}
	// A run closed while its timers are pending and an HTTP connection idles.
	src := `
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = async function* (thread, runtime) {
  setInterval(() => {}, 5);
  setTimeout(() => {}, 60000);
  await (await fetch(process.env.TEST_SERVER + "/ok")).text(); // leaves an idle keep-alive connection
  const h = await runtime.cas.put("x");
  yield { role: "r", contentHash: h, meta: {} };
};`
	pending, err := Load([]byte(src), "pending.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t)
	h.env["TEST_SERVER"] = srv.URL
	r, err := pending.Start(context.Background(), threadFor(pending, ""), h)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Part of the scene, not a wait: the test holds with or without it, but
	// with it the 5 ms interval has fired a few times and the connection
	// has gone idle by the time Close meets them.
	time.Sleep(20 * time.Millisecond)
	_ = r.Close()

	// Nothing of ours may remain: no goroutine in this package, goja, an
	// HTTP connection or a child process wait.
	ours := func() []string {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		var out []string
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "TestNoGoroutineLeaks") {
				continue // the test itself
			}
			if strings.Contains(g, "testing.(*T).Parallel(") {
				continue // a parallel test, waiting for the serial ones to end
			}
			for _, marker := range []string{filepath.Join("engine", "jsrt") + "/", "goja", "persistConn", "os/exec", "os.(*Process)"} {
				if strings.Contains(g, marker) {
					out = append(out, g)
					break
				}
			}
		}
		return out
	}
	var after int
	var left []string
	t.Cleanup(func() {
		if after > baseline || len(left) > 0 {
			t.Logf("%d goroutines before, %d after; left behind:\n%s", baseline, after, strings.Join(left, "\n\n"))
		}
	})
	testkit.WaitUntil(t, "the closed runs' goroutines to end", func() bool {
		after = settle()
		left = ours()
		return after <= baseline && len(left) == 0
	})
}
