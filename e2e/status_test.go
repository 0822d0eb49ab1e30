package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestStatusFollowsARealConnect: `uncaged-workflow status` on a machine
// tells a person what its `connect` is doing — connected, retrying while
// the gateway is down, and not running once it stopped — and counts what
// the root holds.
func TestStatusFollowsARealConnect(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	laptop, root := g.connector("laptop", map[string]string{"plan-code-review": "linear.esm.js"})

	type status struct {
		Workflows int
		Engine    struct{ Running bool }
		Connect   *struct {
			Name, Gateway, State, Detail string
			Running                      bool
		}
	}
	read := func() status {
		t.Helper()
		r := run(t, root, "status", "--json")
		var s status
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("status --json: %+v", r)
		}
		return s
	}
	testkit.WaitUntil(t, "status to say connected", func() bool {
		s := read()
		return s.Connect != nil && s.Connect.Running && s.Connect.State == "connected"
	})
	s := read()
	// No engine host: connect starts one when a thread needs it.
	if s.Workflows != 1 || s.Engine.Running || s.Connect.Name != "laptop" || s.Connect.Gateway != "http://"+g.front {
		t.Fatalf("status: %+v %+v", s, *s.Connect)
	}
	text := run(t, root, "status").stdout
	for _, want := range []string{`connected: "laptop" to http://` + g.front, "1 registered", "engine host   not running"} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}

	g.gw.stop(syscall.SIGTERM)
	testkit.WaitUntil(t, "status to say retrying", func() bool {
		s := read()
		return s.Connect.Running && s.Connect.State == "retrying" && s.Connect.Detail != ""
	})
	g.restart()
	testkit.WaitUntil(t, "status to say connected again", func() bool { return read().Connect.State == "connected" })

	laptop.stop(syscall.SIGTERM)
	s = read()
	if s.Connect.Running || s.Connect.State != "stopped" {
		t.Fatalf("after connect exited: %+v", *s.Connect)
	}
	if text := run(t, root, "status").stdout; !strings.Contains(text, `not running (last: "laptop"`) {
		t.Fatalf("status:\n%s", text)
	}
}
