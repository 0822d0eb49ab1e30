package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// routedReview is a writer and a reviewer, each a shell command printing
// its meta; the reviewer's output schema and route vary.
func routedReview(reviewerMeta, reviewerOutput, route string) string {
	return `version: 1
description: Write until the reviewer approves
roles:
  writer:
    description: Writes
    prompt: Write.
    agent: {type: exec, command: sh, args: [-c, "echo '{\"text\":\"hi\"}'"]}
  reviewer:
    description: Reviews
    prompt: Review.
    agent: {type: exec, command: sh, args: [-c, "echo '` + strings.ReplaceAll(reviewerMeta, `"`, `\"`) + `'"]}
    output: ` + reviewerOutput + `
graph:
  __start__: writer
  writer: reviewer
  reviewer: ` + route + "\n"
}

// TestYAMLRouteKeysAreChecked: workflow add refuses the file — a
// misspelt route key — with the status it meant, then a file with several
// problems naming each, and registers nothing.
func TestYAMLRouteKeysAreChecked(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	file := filepath.Join(t.TempDir(), "review.yaml")
	src := routedReview(`{"status":"approved"}`,
		`{type: object, properties: {status: {enum: [approved, rejected]}}, required: [status]}`,
		`{aproved: __end__, rejected: writer}`)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, root, "workflow", "add", "review", file)
	if r.code != 1 || r.stdout != "" || r.stderr != "review.yaml: line 16: graph.reviewer.aproved: no such status (did you mean \"approved\"?)\n" {
		t.Fatalf("workflow add: %+v", r)
	}
	// A status no key routes, beside a key no status can take: both, in
	// one report.
	src = strings.Replace(src, "{aproved: __end__, rejected: writer}", "{approved: __end__, rejectd: writer, revise: writer}", 1)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, root, "workflow", "add", "review", file)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("workflow add: %+v", r)
	}
	for _, want := range []string{
		"review.yaml: 2 problems:\n",
		`  line 16: graph.reviewer.rejectd: no such status (did you mean "rejected"?)` + "\n",
		`  line 16: graph.reviewer.revise: no such status (roles.reviewer.output allows: "approved", "rejected")`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r := run(t, root, "workflow", "list"); strings.Contains(r.stdout, "review") {
		t.Fatalf("the refused workflow is listed: %+v", r)
	}
}

// TestYAMLUnroutedStatusFailsTheThread: a status no route matches ends the
// thread as a failure that names it — in thread show and in live — where
// it used to end as "completed: moderator returned END".
func TestYAMLUnroutedStatusFailsTheThread(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	file := filepath.Join(t.TempDir(), "review.yaml")
	// The schema does not list the statuses, so add can only warn.
	src := routedReview(`{"status":"maybe"}`,
		`{type: object, properties: {status: {type: string}}, required: [status]}`,
		`{approved: __end__, rejected: writer}`)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, root, "workflow", "add", "review", file)
	if r.code != 0 || !strings.Contains(r.stderr, "warning: review.yaml: line 16: graph.reviewer: route keys are not checked") {
		t.Fatalf("workflow add: %+v", r)
	}
	id := start(t, root, "review", "--prompt", "greet")
	s := finished(t, root, id)
	want := `role "reviewer" returned status "maybe", and no route of graph.reviewer matches it (keys: approved, rejected; no FALLBACK)`
	if s.Status != "failed" || s.Result.ReturnCode != 1 || !strings.Contains(s.Result.Summary, want) || roles(s) != "writer,reviewer" {
		t.Fatalf("thread: status %s, steps %s, result %+v", s.Status, roles(s), s.Result)
	}
	if live := run(t, root, "live", id); !strings.Contains(live.stdout, want) {
		t.Fatalf("live: %+v", live)
	}
}
