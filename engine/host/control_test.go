package host

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/engine/threads"
)

// raceControl runs a and b at once, each after a random number of
// yields, so that runs try both orders and the moments in between.
func raceControl(rng *rand.Rand, a, b func() error) (ea, eb error) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	yieldsA, yieldsB := rng.IntN(50), rng.IntN(50)
	go func() {
		defer wg.Done()
		<-start
		for range yieldsA {
			runtime.Gosched()
		}
		ea = a()
	}()
	go func() {
		defer wg.Done()
		<-start
		for range yieldsB {
			runtime.Gosched()
		}
		eb = b()
	}()
	close(start)
	wg.Wait()
	return ea, eb
}

// Two control requests for one thread — two resumes, resume and kill,
// two pauses, two kills, pause and kill, pause and resume, a pause as
// the thread ends — sent at once, many times over, in random order:
// each outcome is one of those the orders allow, and the request that
// loses says what it lost to (never "thread not paused" for a thread a
// resume has just let go).
func TestAControlRequestThatLosesARaceSaysWhatItLostTo(t *testing.T) {
	t.Parallel()
	ending := goFlow{roles: []string{"wait"}, release: make(chan struct{})}
	f := newFixture(t, 0, map[string]goFlow{
		"blocked": {roles: []string{"a", "wait"}, release: make(chan struct{})}, // never released
		"ending":  ending,
	})
	endingHash := strings.ToUpper("ending0000000")
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 20))

	// States a thread is put in before the race.
	started := func(workflow string) string {
		id, err := f.client.Run(RunRequest{Workflow: workflow})
		if err != nil {
			t.Fatal(err)
		}
		f.waitFor("thread "+id+" to take its first step", func() bool {
			r, _ := threads.Resolve(f.l, id)
			return r.Head != r.Start
		})
		return id
	}
	running := func() string { return started("blocked") }
	// The blocked thread's role never finishes: a pause of it stays
	// pending (pausing).
	pausing := func() string {
		id := running()
		if err := f.client.Pause(id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	interrupted := func() string {
		id := running()
		f.stopHost()
		f.startHost(0)
		return id
	}
	var release chan struct{} // of the "ending" thread in the race
	nearItsEnd := func() string {
		release = make(chan struct{})
		ending.release = release
		f.flows[endingHash] = ending
		id, err := f.client.Run(RunRequest{Workflow: "ending"})
		if err != nil {
			t.Fatal(err)
		}
		f.waitFor("thread "+id+" to be listed", func() bool { list, _ := f.client.List(); return len(list) > 0 })
		return id
	}

	pause := func(id string) func() error { return func() error { return f.client.Pause(id) } }
	resume := func(id string) func() error { return func() error { return f.client.Resume(id) } }
	kill := func(id string) func() error { return func() error { return f.client.Kill(id) } }
	end := func(string) func() error { return func() error { close(release); return nil } }

	// Messages, "" for success; ID stands for the thread's id.
	const (
		ok             = ""
		resumedByOther = "thread ID is already running: another request resumed it"
		beingResumed   = "thread ID is already being resumed by another request"
		beingKilled    = "thread ID is already being killed by another request"
		alreadyPausing = "thread already pausing: it stops once the role in flight has finished its step"
		alreadyPaused  = "thread already paused"
		killedAlready  = "thread not running: ID has already finished (killed, return code 130)"
		completed      = "thread not running: ID has already finished (completed, return code 0)"
		interruptedMsg = "thread not running: ID was interrupted (the host running it stopped); resume it to go on"
	)
	for _, tc := range []struct {
		name    string
		state   func() string
		a, b    func(id string) func() error
		allowed [][2]string // (a's outcome, b's outcome) pairs the orders allow
	}{
		{"two resumes of a pausing thread", pausing, resume, resume,
			[][2]string{{ok, resumedByOther}, {resumedByOther, ok}}},
		{"two resumes of an interrupted thread", interrupted, resume, resume,
			[][2]string{{ok, resumedByOther}, {ok, beingResumed}, {resumedByOther, ok}, {beingResumed, ok}}},
		{"resume and kill of a pausing thread", pausing, resume, kill,
			[][2]string{{ok, ok}, {beingKilled, ok}, {killedAlready, ok}}},
		{"resume and kill of an interrupted thread", interrupted, resume, kill,
			[][2]string{{ok, ok}, {beingKilled, ok}, {killedAlready, ok}}},
		{"two pauses of a running thread", running, pause, pause,
			// Paused at once when the first pause found the run at the
			// gate, between its steps.
			[][2]string{{ok, alreadyPausing}, {alreadyPausing, ok}, {ok, alreadyPaused}, {alreadyPaused, ok}}},
		{"two kills of a running thread", running, kill, kill,
			[][2]string{{ok, beingKilled}, {ok, killedAlready}, {beingKilled, ok}, {killedAlready, ok}}},
		{"two kills of an interrupted thread", interrupted, kill, kill,
			[][2]string{{ok, beingKilled}, {ok, killedAlready}, {beingKilled, ok}, {killedAlready, ok}}},
		{"pause and kill of a running thread", running, pause, kill,
			[][2]string{{ok, ok}, {beingKilled, ok}, {killedAlready, ok}}},
		{"pause and resume of an interrupted thread", interrupted, pause, resume,
			[][2]string{{ok, ok}, {interruptedMsg, ok}}},
		{"a pause as the thread ends", nearItsEnd, pause, end,
			[][2]string{{ok, ok}, {completed, ok}}},
	} {
		seen := map[[2]string]int{}
		for range 12 {
			id := tc.state()
			ea, eb := raceControl(rng, tc.a(id), tc.b(id))
			got := [2]string{message(ea, id), message(eb, id)}
			allowed := false
			for _, want := range tc.allowed {
				allowed = allowed || got == want
			}
			if !allowed {
				t.Errorf("%s: got (%q, %q), want one of %q", tc.name, got[0], got[1], tc.allowed)
			}
			seen[got]++
			// Whatever is left of the thread goes, so that the next one
			// has a slot.
			_ = f.client.Resume(id)
			_ = f.client.Kill(id)
			f.finished(id)
		}
		t.Logf("%s: %v", tc.name, seen)
	}
}

// message is err's text with the thread's id written ID, "" for nil.
func message(err error, id string) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), id, "ID")
}
