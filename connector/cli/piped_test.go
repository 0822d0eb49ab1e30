package cli

import (
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// What the original writes for testdata/original-root when its stdout is
// a pipe (its thread list and workflow list print the same lines on a
// terminal). thread list: every thread of bundles/*/threads.json and
// history/*.jsonl, sorted by "<bundle hash>/<thread id>" with
// localeCompare, each "<id>\t<bundle hash>\t<name>" where the name is the
// payload.name of the thread's start node (threads.json and the history
// line name it): AB2BP0Y50PSY6 and the legacy 1KBARMP9Z89J2 say
// "demo-flow", TE2CRJNW51W4G says "demo". workflow list: the registry's
// names sorted, each "<name>\t<hash>\t<timestamp>" from workflow.yaml.
const (
	originalThreadLines = "06E0000000000000000000000C\tHEXEJQQQ6EVYJ\tdemo-flow\n" +
		"06EZHZP3N4J2B8V6Q0T9W1X5Y4\tHEXEJQQQ6EVYJ\tdemo\n" +
		"06EZJ3QM9Q4S5XWA0R1C7D8E2G\tHEXEJQQQ6EVYJ\tdemo-flow\n"
	originalWorkflowLines = "demo-flow\tHEXEJQQQ6EVYJ\t1778000000000\n"
)

func TestPipedListsPrintTheOriginalsLines(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	if got := c.ok("thread", "list"); got != originalThreadLines {
		t.Errorf("thread list | cat:\n%q\nwant\n%q", got, originalThreadLines)
	}
	if got := c.ok("workflow", "list"); got != originalWorkflowLines {
		t.Errorf("workflow list | cat:\n%q\nwant\n%q", got, originalWorkflowLines)
	}
	// The window and the filter keep the line format.
	if got := c.ok("thread", "list", "demo-flow", "--offset", "1", "--limit", "1"); got != "06EZHZP3N4J2B8V6Q0T9W1X5Y4\tHEXEJQQQ6EVYJ\tdemo\n" {
		t.Errorf("a page of lines = %q", got)
	}
	// -o table (and -o wide) keep the table in a pipe; --json stays JSON.
	for _, args := range [][]string{{"-o", "table"}, {"-o", "wide"}, {"--output=table"}} {
		for _, list := range []string{"thread", "workflow"} {
			if got := c.ok(append([]string{list, "list"}, args...)...); !strings.HasPrefix(got, map[string]string{"thread": "THREAD  ", "workflow": "NAME  "}[list]) || strings.Contains(got, "\t") {
				t.Errorf("%s list %v:\n%s", list, args, got)
			}
		}
	}
	if got := c.ok("thread", "list", "--json"); !strings.HasPrefix(got, "[\n  {\n    \"threadId\": ") {
		t.Errorf("thread list --json:\n%s", got)
	}

	empty := newCLI(t)
	if got := empty.ok("thread", "list"); got != "(no threads found)\n" {
		t.Errorf("no threads: %q", got)
	}
	if got := empty.ok("workflow", "list"); got != "(no workflows registered)\n" {
		t.Errorf("no workflows: %q", got)
	}
}

// The original orders by "<bundle hash>/<thread id>" (bundle first, not
// newest first), and names a thread whose start node is gone "(unknown)".
func TestPipedThreadListOrderAndUnknownNames(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	for _, th := range []struct{ bundle, id string }{
		{"BBBBBBBBBBBBB", "01AAAAAAAAAAAAAAAAAAAAAAAA"},
		{"AAAAAAAAAAAAA", "09ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"AAAAAAAAAAAAA", "01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
	} {
		if err := threads.Upsert(l.BundleDir(th.bundle), th.id, threads.Entry{Head: "NQXPK4YRFR4NT", Start: "NQXPK4YRFR4NT", UpdatedAt: 1}); err != nil {
			t.Fatal(err)
		}
	}
	want := "01ZZZZZZZZZZZZZZZZZZZZZZZZ\tAAAAAAAAAAAAA\t(unknown)\n" +
		"09ZZZZZZZZZZZZZZZZZZZZZZZZ\tAAAAAAAAAAAAA\t(unknown)\n" +
		"01AAAAAAAAAAAAAAAAAAAAAAAA\tBBBBBBBBBBBBB\t(unknown)\n"
	if got, _, _ := c.run("thread", "list"); got != want {
		t.Fatalf("thread list | cat:\n%s\nwant\n%s", got, want)
	}
}

// localeOrder agrees with JavaScript's "a".localeCompare("b") (node's ICU)
// on the characters ids and hashes hold.
func TestLocaleOrderIsLocaleCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"a", "B", -1}, {"a", "A", -1}, {"A", "a", 1}, {"_", "-", -1}, {"-", "/", -1},
		{"A-B", "A_B", 1}, {"1", "A", -1}, {"Z", "1", 1}, {"AB", "ABC", -1},
		{"HASH/ID", "HASH2/ID", -1}, {"aB", "Ab", -1}, {"T1", "t1", 1}, {"06E0/x", "06E0-x", 1},
		{"SAME", "SAME", 0},
	} {
		if got := localeOrder(tc.a, tc.b); got != tc.want {
			t.Errorf("localeOrder(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := localeOrder(tc.b, tc.a); got != -tc.want {
			t.Errorf("localeOrder(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}
