package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// proc is a background process of a test, stopped when the test ends.
type proc struct {
	cmd  *exec.Cmd
	logs *testkit.Buffer // both output streams, read while the process writes
	done chan struct{}   // closed once the process has exited and been reaped
	exit error           // what Wait returned; read only after done
	// endSig is what stops it when the test ends (0: SIGTERM).
	endSig syscall.Signal
}

// startProc runs one of the binaries built for the tests in the
// background, with env added to this process's environment.
func startProc(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	return launch(t, cmd, name+" "+strings.Join(args, " "))
}

// launch starts cmd in the background; when the test ends it gets SIGTERM
// (SIGKILL if it outlives that by 15 s), and, if the test failed, its
// output (the end of it) goes to the test log under what.
func launch(t *testing.T, cmd *exec.Cmd, what string) *proc {
	t.Helper()
	p := &proc{cmd: cmd, logs: &testkit.Buffer{}, done: make(chan struct{})}
	// One writer for both streams: exec then writes from one goroutine.
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exit = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(p.endSignal())
		if t.Failed() {
			out := p.logs.String()
			if len(out) > 20000 {
				out = "…" + out[len(out)-20000:]
			}
			t.Logf("%s (%v) output:\n%s", what, p.exit, out)
		}
	})
	return p
}

func (p *proc) endSignal() syscall.Signal {
	if p.endSig == 0 {
		return syscall.SIGTERM
	}
	return p.endSig
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits until the process has exited; one that is
// still there after 15 s is killed.
func (p *proc) stop(sig syscall.Signal) {
	if p.exited() {
		return
	}
	// An error means it has exited already, which done tells below.
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill() // as above
		<-p.done
	}
}

// stopTogether stops procs at once when the test ends, before their own
// cleanups run (which then find them gone): a connector takes about a
// second to exit on SIGTERM, and one after the other that adds up.
func stopTogether(t *testing.T, procs ...*proc) {
	t.Cleanup(func() {
		for _, p := range procs {
			if !p.exited() {
				_ = p.cmd.Process.Signal(p.endSignal()) // as in stop
			}
		}
		for _, p := range procs {
			p.stop(p.endSignal())
		}
	})
}

// listening waits for a gateway's "gateway listening" log line and returns
// the address it names: gateways listen on port 0, so that tests running
// side by side never race for a port.
func (p *proc) listening(t *testing.T) string {
	t.Helper()
	var addr string
	testkit.WaitUntil(t, "the gateway's listening address in its log", func() bool {
		for _, line := range strings.Split(p.logs.String(), "\n") {
			var m struct{ Msg, Address string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "gateway listening" && m.Address != "" {
				addr = m.Address
				return true
			}
		}
		if p.exited() {
			t.Fatalf("the gateway exited at start (%v):\n%s", p.exit, p.logs.String())
		}
		return false
	})
	return addr
}

// serving waits for `uncaged-workflow serve`'s "API listening on" line
// and returns the base URL it names (serve, too, listens on port 0).
func (p *proc) serving(t *testing.T) string {
	t.Helper()
	var base string
	testkit.WaitUntil(t, "serve to print its address", func() bool {
		for _, line := range strings.Split(p.logs.String(), "\n") {
			if addr, ok := strings.CutPrefix(line, "API listening on "); ok {
				base = strings.TrimSpace(addr)
				return true
			}
		}
		if p.exited() {
			t.Fatalf("serve exited: %s", p.logs.String())
		}
		return false
	})
	return base
}

// waitOK waits until a GET of url answers 200.
func waitOK(t *testing.T, what, url string) {
	t.Helper()
	testkit.WaitUntil(t, what, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// freePort is a loopback address no one listened on a moment ago, for the
// programs that cannot report the port they got (nginx, Caddy, a
// connector's --listen). The kernel hands out ports in a random order, so
// tests running side by side do not get the same one.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
