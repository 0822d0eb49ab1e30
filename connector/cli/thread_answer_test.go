package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// runIn runs a command with stdin.
func (c *cli) runIn(stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(args, Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return c.env[k] }})
	return out.String(), errb.String(), code
}

const approvalWorkflow = `version: 1
description: A person approves
roles:
  approve:
    description: Approves
    prompt: Ship the plan?
    agent: {type: human, assignee: ana}
    output:
      type: object
      properties:
        status: {enum: [approved, rejected]}
        note: {type: string}
        urgent: {type: boolean}
      required: [status]
  ship: {description: Ships, prompt: Ship., agent: {type: exec, command: /bin/sh, args: [-c, 'echo "{}"']}}
graph: {__start__: approve, approve: {approved: ship, rejected: __end__}}
`

func TestThreadAnswerFromTheCommandLine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	addYAML(t, c, "approval", approvalWorkflow)
	startHost(t, c)
	l := storage.Layout{Root: c.root}
	status := func(id string) threads.Status {
		out, _, _ := c.run("thread", "list", "--json")
		for _, line := range strings.Split(out, "{") {
			if strings.Contains(line, id) {
				for _, s := range []threads.Status{threads.StatusWaiting, threads.StatusCompleted, threads.StatusRunning} {
					if strings.Contains(line, `"status": "`+string(s)+`"`) || strings.Contains(line, `"status":"`+string(s)+`"`) {
						return s
					}
				}
			}
		}
		return ""
	}
	first := strings.TrimSpace(c.ok("run", "approval"))
	second := strings.TrimSpace(c.ok("run", "approval"))
	testkit.WaitUntil(t, "both threads to wait", func() bool {
		return status(first) == threads.StatusWaiting && status(second) == threads.StatusWaiting
	})
	listed := c.ok("thread", "list", "--status", "waiting", "-o", "table")
	if !strings.Contains(listed, first) || !strings.Contains(listed, second) || !strings.Contains(listed, "waiting") {
		t.Fatalf("thread list --status waiting:\n%s", listed)
	}
	if got := c.ok("thread", "list", "--status", "completed"); strings.Contains(got, first) {
		t.Fatalf("a waiting thread listed as completed:\n%s", got)
	}
	c.fails(`--status "asleep" is not a thread status`, "thread", "list", "--status", "asleep")

	// Refused answers name each field and change nothing.
	before := c.snapshot()
	c.fails("/status:", "thread", "answer", first, "--json", `{"status":"maybe"}`)
	c.fails("(the answer): must be a JSON object", "thread", "answer", first, "--json", `{"status":`)
	c.fails("not both", "thread", "answer", first, "--json", `{}`, "--file", "x")
	c.unchanged(before)

	// --json answers; the thread goes on and ends.
	out := c.ok("thread", "answer", first, "--json", `{"status":"rejected"}`)
	if want := "answered thread " + first + " (role approve) as " + questions.LocalAnswerer(); !strings.Contains(out, want) {
		t.Fatalf("answer said %q, want %q", out, want)
	}
	testkit.WaitUntil(t, "the first thread to complete", func() bool { return status(first) == threads.StatusCompleted })
	c.fails("already answered by "+questions.LocalAnswerer(), "thread", "answer", first, "--json", `{"status":"approved"}`)

	// Interactively: each field is asked for; a reply that is not one of
	// the choices is asked again.
	stdout, stderr, code := c.runIn("3\napproved\nship it today\nmaybe\ny\n", "thread", "answer", second)
	if code != 0 {
		t.Fatalf("interactive answer: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"Ship the plan?", "as role approve, of ana", "status [1) approved, 2) rejected]", "choose one of the 2", "urgent [y/n], optional", "answer y or n", "note (string), optional"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the prompts lack %q:\n%s", want, stderr)
		}
	}
	testkit.WaitUntil(t, "the second thread to complete", func() bool { return status(second) == threads.StatusCompleted })
	rec, err := threads.Resolve(l, second)
	if err != nil {
		t.Fatal(err)
	}
	qrec, err := questions.Open(l).Read(rec.BundleHash, second)
	if err != nil {
		t.Fatal(err)
	}
	a, err := questions.Open(l).AnswerOf(qrec)
	if err != nil || string(a.Answer) != `{"note":"ship it today","status":"approved","urgent":true}` {
		t.Fatalf("the answer recorded: %s, %v", a.Answer, err)
	}
}
