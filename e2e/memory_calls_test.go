package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// endlessBody serves zeros without end, announcing 3 GB when asked to
// (?announce), else as a stream of unknown length: nothing real behind
// either.
func endlessBody(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("announce") {
			w.Header().Set("Content-Length", "3000000000")
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOneCallPastTheBudgetFailsAloneUnderACappedHost is the issue's
// second list: with the host's address space capped as the issue capped
// it, threads whose one call would allocate gigabytes at once — a typed
// array of 1e11 and of 2e9 bytes, /dev/zero read whole, a 3 GB response
// body (announced or not), a spread of 1e9 holes — run beside a thread
// doing ordinary work. Each fails alone with a summary naming the budget;
// the other completes, as does a thread that allocates 8 MiB in one
// call, and the host runs on.
func TestOneCallPastTheBudgetFailsAloneUnderACappedHost(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "calls", "memory-calls.esm.js")
	add(t, root, "slow", "slow.esm.js")
	host := startCappedHost(t, root, "--idle-exit", "1m")
	url := endlessBody(t)

	bystander := start(t, root, "slow")
	runaways := map[string]string{}
	for _, call := range []string{"typed-1e11", "typed-2e9", "dev-zero", "fetch " + url + "/?announce", "fetch " + url + "/", "spread"} {
		runaways[call] = start(t, root, "calls", "--prompt", call)
	}
	for call, id := range runaways {
		var s shown
		testkit.WaitUntil(t, "the thread making "+call+" to end", func() bool {
			if host.exited() {
				t.Fatalf("the engine host died under %s:\n%s", call, host.logs.String())
			}
			s = show(t, root, id)
			return s.Result != nil
		})
		if s.Status != "failed" || s.Result.ReturnCode != 1 {
			t.Fatalf("%s ended %s: %+v", call, s.Status, s.Result)
		}
		sum := s.Result.Summary
		t.Logf("%s: %s", call, sum)
		if !strings.Contains(sum, "512MiB") || !(strings.Contains(sum, "memory budget exceeded") || strings.Contains(sum, "out of memory")) {
			t.Errorf("the summary of %s does not name the budget: %s", call, sum)
		}
	}
	if b := finished(t, root, bystander); b.Status != "completed" || roles(b) != "one,two,three,four,five" {
		t.Fatalf("bystander ended %s: %+v, steps %s", b.Status, b.Result, roles(b))
	}
	if s := finished(t, root, start(t, root, "calls", "--prompt", "small")); s.Status != "completed" {
		t.Fatalf("a thread allocating 8 MiB at once ended %s: %+v", s.Status, s.Result)
	}
	if host.exited() {
		t.Fatal("the engine host exited")
	}
	if pid := hostPID(root); pid != host.cmd.Process.Pid {
		t.Fatalf("threads ran in host %d, not the capped one (%d)", pid, host.cmd.Process.Pid)
	}
}
