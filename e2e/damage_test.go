package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// blobFiles counts the CAS blobs of a root.
func blobFiles(t *testing.T, root string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "cas", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestDamageIsReportedNeverSweptAndRepaired is the reported loss through the
// binary: a threads.json cut by 3 bytes, or a history line missing one
// quote, used to read as "no threads" and let cas gc delete the threads'
// nodes. Now every listing names the file and line, gc and thread rm refuse
// and delete nothing, and doctor --repair rebuilds the file from the CAS.
func TestDamageIsReportedNeverSweptAndRepaired(t *testing.T) {
	t.Parallel()
	const bundle = "bundles/HEXEJQQQ6EVYJ"
	cases := []struct {
		name, file, line, hidden, start string
		damage                          func(string) string
	}{
		{"threads.json cut by 3 bytes", bundle + "/threads.json", "line 6", "06EZJ3QM9Q4S5XWA0R1C7D8E2G", "AB2BP0Y50PSY6",
			func(s string) string { return s[:len(s)-3] }},
		{"history line missing a quote", bundle + "/history/2026-05-05.jsonl", "line 1", "06EZHZP3N4J2B8V6Q0T9W1X5Y4", "TE2CRJNW51W4G",
			func(s string) string { return strings.Replace(s, `"start":"TE`, `"start":TE`, 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "root")
			if err := os.CopyFS(root, os.DirFS("../connector/cli/testdata/original-root")); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(root, c.file)
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, []byte(c.damage(string(b))), 0o644); err != nil {
				t.Fatal(err)
			}
			blobs := blobFiles(t, root)

			r := run(t, root, "thread", "list", "-o", "table")
			if r.code != 1 || strings.Contains(r.stdout, c.hidden) || !strings.Contains(r.stderr, path+", "+c.line) {
				t.Fatalf("thread list = %+v", r)
			}
			if r := run(t, root, "cas", "gc"); r.code != 1 || !strings.Contains(r.stderr, path+", "+c.line) || r.stdout != "" {
				t.Fatalf("cas gc = %+v", r)
			}
			if r := run(t, root, "thread", "rm", "06E0000000000000000000000C"); r.code != 1 || !strings.Contains(r.stderr, "was not removed") {
				t.Fatalf("thread rm = %+v", r)
			}
			if n := blobFiles(t, root); n != blobs {
				t.Fatalf("%d of %d blobs left after refusals", n, blobs)
			}
			if r := run(t, root, "doctor"); r.code != 1 || !strings.Contains(r.stdout, "PROBLEM") {
				t.Fatalf("doctor = %+v", r)
			}

			if r := run(t, root, "doctor", "--repair"); r.code != 0 || !strings.Contains(r.stdout, "1 recovered") {
				t.Fatalf("doctor --repair = %+v", r)
			}
			if r := run(t, root, "thread", "list", "-o", "table"); r.code != 0 || strings.Count(r.stdout, "  demo-flow  ") != 3 || r.stderr != "" {
				t.Fatalf("thread list after repair = %+v", r)
			}
			if r := run(t, root, "thread", "show", c.hidden); r.code != 0 || !strings.Contains(r.stdout, `"start": "`+c.start+`"`) {
				t.Fatalf("thread show after repair = %+v", r)
			}
			if r := run(t, root, "cas", "gc"); r.code != 0 || !strings.HasSuffix(r.stdout, "deleted 1 entries\n") {
				t.Fatalf("cas gc after repair = %+v (only the fixture's orphan may go)", r)
			}
			if r := run(t, root, "cas", "get", c.start); r.code != 0 {
				t.Fatalf("the start node is gone: %+v", r)
			}
		})
	}
}
