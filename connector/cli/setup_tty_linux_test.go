package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: writes to master are what a person
// types into the terminal slave, and master reads what the terminal echoes.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		_ = m.Close() // the test is skipped; nothing was written
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		_ = m.Close() // the test is skipped; nothing was written
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		_ = m.Close() // the test is skipped; nothing was written
		t.Skipf("open pts: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, s
}

func TestInteractiveSetupReadsTheKeyWithoutEcho(t *testing.T) {
	srv := modelsServer(t, "sk-secret-123", "chat-a", "chat-b")
	usePresets(t, "- {name: local, label: Local, baseUrl: "+srv.URL+"/v1}\n")
	master, slave := openPTY(t)
	echoed := &testkit.Buffer{}
	go func() { _, _ = io.Copy(echoed, master) }() // ends with EIO when the pty closes

	c := newCLI(t)
	inDir(t, t.TempDir())
	stdout, stderr := &testkit.Buffer{}, &testkit.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run([]string{"setup"}, Env{Stdin: slave, Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return c.env[k] }})
	}()
	typeLine := func(s string) {
		t.Helper()
		if _, err := master.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}

	testkit.WaitUntil(t, "the provider prompt", func() bool { return strings.Contains(stdout.String(), "Choose [1-2]: ") })
	typeLine("1")
	testkit.WaitUntil(t, "the key prompt", func() bool { return strings.Contains(stdout.String(), "API key for this provider: ") })
	testkit.WaitUntil(t, "echo to be turned off", func() bool {
		tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		return err == nil && tio.Lflag&unix.ECHO == 0
	})
	typeLine("sk-secret-123")
	testkit.WaitUntil(t, "the model prompt", func() bool { return strings.Contains(stdout.String(), "Default model [1-2]: ") })
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Fatalf("echo not restored after the key: %v", err)
	}
	typeLine("2")
	testkit.WaitUntil(t, "the workspace prompt", func() bool { return strings.Contains(stdout.String(), "Workflow workspace path") })
	typeLine("skip")
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	testkit.WaitUntil(t, "the last answer's echo", func() bool { return strings.Contains(echoed.String(), "skip") })
	if strings.Contains(echoed.String(), "sk-secret-123") || strings.Contains(stdout.String(), "sk-secret-123") {
		t.Fatalf("the key was shown: echo %q", echoed.String())
	}
	if !strings.Contains(stdout.String(), `config.models.default = "local/chat-b"`) {
		t.Fatalf("stdout = %s", stdout)
	}
	if _, cfg := c.config(t); cfg.Providers["local"].APIKey != "sk-secret-123" {
		t.Fatalf("stored key = %q", cfg.Providers["local"].APIKey)
	}
}
