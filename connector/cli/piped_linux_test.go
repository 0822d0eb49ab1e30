package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// On a terminal the lists keep their table (the header, aligned columns,
// no tabs); only a pipe gets the original's lines.
func TestListsOnATerminalPrintTheTable(t *testing.T) {
	c := fixtureCLI(t)
	for _, tc := range []struct {
		args   []string
		header string
	}{
		{[]string{"thread", "list"}, "THREAD  "},
		{[]string{"workflow", "list"}, "NAME  "},
	} {
		master, slave := openPTY(t)
		shown := &testkit.Buffer{}
		go func() { _, _ = io.Copy(shown, master) }() // ends with EIO when the pty closes
		var stderr strings.Builder
		code := Run(tc.args, Env{Stdin: strings.NewReader(""), Stdout: slave, Stderr: &stderr, Getenv: func(k string) string { return c.env[k] }})
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr.String())
		}
		testkit.WaitUntil(t, "the list on the terminal", func() bool { return strings.Contains(shown.String(), "demo-flow") })
		testkit.WaitUntil(t, "the whole list", func() bool {
			return strings.Count(shown.String(), "\n") == map[string]int{"thread": 4, "workflow": 2}[tc.args[0]]
		})
		out := strings.ReplaceAll(shown.String(), "\r\n", "\n")
		if !strings.HasPrefix(out, tc.header) || strings.Contains(out, "\t") {
			t.Errorf("%v on a terminal:\n%s", tc.args, out)
		}
	}
}
