package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// timedItem is a step (role "stepN") or a debug line ("lineN") at a time.
type timedItem struct {
	name string
	at   int64 // ms
	step bool
}

// writeFinishedThread stores a finished thread whose steps and debug-log
// lines are items (steps in chain order, lines in log order), ended at end.
func writeFinishedThread(t *testing.T, root, id string, items []timedItem, end int64) {
	t.Helper()
	const bundle = "LIVEBUNDLE000"
	l := storage.Layout{Root: root}
	store := cas.Open(l.CASDir())
	must := func(h string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	prompt := must(store.Put("go"))
	start := must(store.PutNode(node.NewStart(node.StartPayload{Name: "flow", Hash: bundle}, prompt)))
	ancestors := []string{}
	var log strings.Builder
	for _, it := range items {
		if !it.step {
			b, _ := json.Marshal(debugRecord{Tag: "TAG", Content: it.name, Timestamp: it.at})
			log.Write(append(b, '\n'))
			continue
		}
		content := must(store.Put("content of " + it.name))
		h := must(store.PutNode(node.NewState(node.StatePayload{Role: it.name, Meta: canonyaml.Map{}, Start: start, Content: content, Ancestors: ancestors, Timestamp: it.at})))
		ancestors = []string{h}
	}
	summary := must(store.Put("done"))
	meta := canonyaml.Map{{Key: "returnCode", Value: 0}, {Key: "summary", Value: "done"}}
	head := must(store.PutNode(node.NewState(node.StatePayload{Role: node.RoleEnd, Meta: meta, Start: start, Content: summary, Ancestors: ancestors, Timestamp: end})))
	if err := threads.AppendHistory(l.BundleDir(bundle), threads.HistoryEntry{ThreadID: id, Head: head, Start: start, CompletedAt: end}); err != nil {
		t.Fatal(err)
	}
	logPath := l.InfoLog(bundle, id)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// live --debug prints steps and debug lines in time order, whatever the
// interleaving (the lines used to come first, then every step they told
// of). Times are whole seconds apart, as live shows them; a line at a
// step's second comes after the step.
func TestLiveDebugPrintsInTimeOrder(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := rand.New(rand.NewPCG(8, 27))
	base := time.Date(2026, 5, 5, 9, 0, 0, 0, time.Local).UnixMilli()
	for round := range 25 {
		var items []timedItem
		seconds := r.Perm(40)
		nSteps, nLines := 1+r.IntN(6), 1+r.IntN(12)
		stepAt := slices.Sorted(slices.Values(seconds[:nSteps]))
		lineAt := slices.Sorted(slices.Values(seconds[nSteps : nSteps+nLines]))
		if r.IntN(2) == 0 { // a line in the second its step was written
			lineAt = slices.Sorted(slices.Values(append(lineAt, stepAt[r.IntN(nSteps)])))
		}
		for i, s := range stepAt {
			items = append(items, timedItem{name: fmt.Sprintf("step%d", i+1), at: base + int64(s)*1000, step: true})
		}
		for i, s := range lineAt {
			items = append(items, timedItem{name: fmt.Sprintf("line%d", i+1), at: base + int64(s)*1000})
		}
		id := ids.NewThreadID(time.UnixMilli(base + int64(round)))
		writeFinishedThread(t, c.root, id, items, base+41_000)

		want := slices.Clone(items)
		slices.SortStableFunc(want, func(x, y timedItem) int {
			if x.at != y.at {
				return int(x.at - y.at)
			}
			if x.step != y.step && x.step {
				return -1
			}
			if x.step != y.step {
				return 1
			}
			return 0
		})
		out := c.ok("live", "--debug", id)
		var got []string
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.Contains(line, "] ▶ "):
				got = append(got, line[strings.Index(line, "▶ ")+len("▶ "):])
			case strings.Contains(line, "] [TAG] "):
				got = append(got, line[strings.Index(line, "[TAG] ")+len("[TAG] "):])
			}
		}
		var wantNames []string
		for _, it := range want {
			wantNames = append(wantNames, it.name)
		}
		if !slices.Equal(got, wantNames) || !strings.HasSuffix(out, "completed: returnCode=0 — done\n") {
			t.Fatalf("round %d: live --debug printed %v, want %v\n%s", round, got, wantNames, out)
		}
	}
}

// The executor stamps a step, writes it, then logs it ("wrote role"); other
// lines may come at any time but between a step's stamp and its write.
// live polls: it reads the new log lines (at the poll's time), then the
// chain a moment later. Over random timelines and poll times, what
// liveOrder releases is in time order, and everything is released.
func TestLiveOrderOverRandomPolls(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 14))
	for round := range 2000 {
		type written struct {
			item    timedItem
			visible int64 // when a reader can see it
		}
		var log, chain []written
		now := int64(1_000_000)
		steps := 1 + r.IntN(5)
		for s := 1; s <= steps; s++ {
			for range r.IntN(4) { // lines while the role runs
				now += int64(r.IntN(30))
				log = append(log, written{timedItem{name: fmt.Sprintf("line-before-%d-%d", s, len(log)), at: now}, now})
			}
			now += int64(r.IntN(30))
			stamp := now
			now += int64(r.IntN(5)) // writing the step
			chain = append(chain, written{timedItem{name: fmt.Sprintf("step%d", s), at: stamp, step: true}, now})
			now += int64(r.IntN(3))
			log = append(log, written{timedItem{name: fmt.Sprintf("wrote-%d", s), at: now}, now})
		}
		endStamp := now + int64(r.IntN(10))
		chain = append(chain, written{timedItem{name: node.RoleEnd, at: endStamp, step: true}, endStamp + int64(r.IntN(5))})

		var order liveOrder
		order.debug = true
		var printed []timedItem
		logRead := 0
		ended := false
		for poll := int64(999_990); !ended; poll += int64(1 + r.IntN(60)) {
			var lines []debugRecord
			for ; logRead < len(log) && log[logRead].visible <= poll; logRead++ {
				lines = append(lines, debugRecord{Content: log[logRead].item.name, Timestamp: log[logRead].item.at})
			}
			chainAt := poll + int64(r.IntN(8))
			var frames []threads.Frame
			for _, w := range chain {
				if w.visible <= chainAt {
					frames = append(frames, threads.Frame{Hash: w.item.name, State: node.State{Payload: node.StatePayload{Role: w.item.name, Timestamp: w.item.at}}})
				}
			}
			events, end := order.poll(poll, lines, frames)
			for _, e := range events {
				if e.step != nil {
					printed = append(printed, timedItem{name: e.step.Hash, at: e.at, step: true})
				} else {
					printed = append(printed, timedItem{name: e.debug.Content, at: e.at})
				}
			}
			if end != nil {
				ended = true
				printed = append(printed, timedItem{name: end.Hash, at: end.State.Payload.Timestamp, step: true})
			}
			if poll > now+10_000 {
				t.Fatalf("round %d: the end was never released", round)
			}
		}
		// Lines written after the end was released are not waited for.
		if want := len(log) + len(chain); len(printed) < want-1 {
			t.Fatalf("round %d: released %d of %d", round, len(printed), want)
		}
		for i := 1; i < len(printed); i++ {
			if printed[i].at < printed[i-1].at {
				t.Fatalf("round %d: %s (at %d) printed after %s (at %d): %v", round, printed[i].name, printed[i].at, printed[i-1].name, printed[i-1].at, printed)
			}
		}
	}
}
