package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every command that takes a thread id takes a unique prefix of one, as
// git takes a commit's, through one resolver: the same answers for an
// exact id, a prefix (in any case), an ambiguous or too short one, and an
// id that names nothing (with the nearest id when one is close).
func TestThreadIDPrefixesInEveryCommand(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	startHost(t, c)
	const (
		finished = "06EZHZP3N4J2B8V6Q0T9W1X5Y4" // the fixture's threads: 06E0…, 06EZH…, 06EZJ…
		other    = "06EZJ3QM9Q4S5XWA0R1C7D8E2G"
		legacy   = "06E0000000000000000000000C"
	)
	// Each command, given a reference to the finished thread, and what it
	// prints once it has found the thread.
	commands := []struct {
		args  []string
		found string // in stdout or stderr once the thread was found
	}{
		{[]string{"thread", "show"}, `"threadId": "` + finished + `"`},
		{[]string{"thread", "usage"}, "(no model calls recorded)"},
		{[]string{"live"}, "completed: returnCode=0 — done"},
		{[]string{"thread", "live"}, "completed: returnCode=0 — done"},
		{[]string{"thread", "kill"}, "thread not running: " + finished + " has already finished"},
		{[]string{"thread", "pause"}, "thread not running: " + finished + " has already finished"},
		{[]string{"thread", "resume"}, "thread not running: " + finished + " has already finished"},
		{[]string{"thread", "fork", "--step", "9"}, "step 9 not in thread: it has steps 1 to 1"}, // the finished thread's one step
	}
	for _, cmd := range commands {
		with := func(ref string) []string {
			return append(append([]string{}, cmd.args[:min(len(cmd.args), 2)]...), append([]string{ref}, cmd.args[min(len(cmd.args), 2):]...)...)
		}
		if cmd.args[0] == "live" {
			with = func(ref string) []string { return []string{"live", ref} }
		}
		for _, ref := range []string{finished, "06EZH", "06ezhzp3", strings.ToLower(finished)} {
			out, errs, _ := c.run(with(ref)...)
			if !strings.Contains(out+errs, cmd.found) || strings.Contains(errs, "not found") || strings.Contains(errs, "ambiguous") {
				t.Errorf("%v: stdout %q\nstderr %q\nwant %q", with(ref), out, errs, cmd.found)
			}
		}
		for _, tc := range []struct{ ref, want string }{
			{"06EZ", "thread id 06EZ is ambiguous: 2 threads start with it; type more of the id:\n  " + finished + "\n  " + other + "\n"},
			{"06e", `thread not found: 06e (a prefix of a thread id needs at least 4 characters; 3 start with "06e")` + "\n"},
			{"06EZX", "thread not found: 06EZX\n"},
			{finished[:25] + "5", "thread not found: " + finished[:25] + "5 (did you mean \"" + finished + "\"?)\n"},
			{"06EZHZP3N4J2B8V6Q0T9W1X5Y4X", "thread not found: 06EZHZP3N4J2B8V6Q0T9W1X5Y4X (did you mean \"" + finished + "\"?)\n"},
		} {
			before := c.snapshot()
			out, errs, code := c.run(with(tc.ref)...)
			if code != 1 || out != "" || errs != tc.want {
				t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant   %q", with(tc.ref), code, out, errs, tc.want)
			}
			c.unchanged(before)
		}
	}
	// rm too: a unique prefix removes that thread and no other.
	if got := c.ok("thread", "rm", "06e0"); got != "removed thread "+legacy+"\n" {
		t.Fatalf("rm by prefix = %q", got)
	}
	var v threadView
	if err := json.Unmarshal([]byte(c.ok("thread", "show", "06EZJ")), &v); err != nil || v.ThreadID != other {
		t.Fatalf("show by prefix after rm: %+v %v", v, err)
	}
	c.fails("thread not found: "+legacy, "thread", "rm", legacy)
}
