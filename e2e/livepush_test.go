package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// liveEvent is one server-sent event of a live stream, with when it was
// read.
type liveEvent struct {
	name, data string
	at         time.Time
}

// openLiveStream opens a thread's live stream through the gateway and
// sends its events on the returned channel, which is closed when the
// stream ends.
func (g *gatewayEnv) openLiveStream(t *testing.T, machine, id string) <-chan liveEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.front+"/api/clients/"+machine+"/threads/"+id+"/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.dash)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("live stream of %s: %s", id, resp.Status)
	}
	out := make(chan liveEvent, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev liveEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.name != "":
				ev.at = time.Now()
				out <- ev
				ev = liveEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// nextLive waits for the stream's next event; ok is false once it ended.
func nextLive(t *testing.T, evs <-chan liveEvent) (liveEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-evs:
		return ev, ok
	case <-time.After(testkit.WaitBound):
		t.Fatal("no live event within the wait bound")
		return liveEvent{}, false
	}
}

// A live stream through the gateway delivers each step as the engine host
// writes it. The acceptance: a step reaches the client within
// 50 ms of its timestamp. Checked on the median of the thread's 20 steps,
// all written once the stream was open, so that a few steps slowed by a
// loaded machine do not decide it, while polling every 100 ms, as the
// streams did before, puts the median at 50 ms and more.
// Then the engine host is killed under a stream, which ends saying the
// thread no longer runs.
func TestLiveThroughTheGatewayIsPushed(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("pushed", map[string]string{"ticks": "ticks.esm.js", "slow": "slow.esm.js"})

	// The first step waits for the gate, which opens once the stream is.
	gate := filepath.Join(t.TempDir(), "ticks-gate")
	id := startEnv(t, root, []string{"TICKS_GATE=" + gate}, "ticks")
	evs := g.openLiveStream(t, "pushed", id)
	var open time.Time // when the thread-start arrived: steps after it were followed live
	var late []time.Duration
	for {
		ev, ok := nextLive(t, evs)
		if !ok {
			t.Fatal("the stream ended without done")
		}
		if ev.name == "done" {
			if ev.data != `{"reason":"completed"}` {
				t.Fatalf("done: %s", ev.data)
			}
			break
		}
		var rec struct {
			Type      string
			Timestamp int64
		}
		if ev.name != "record" || json.Unmarshal([]byte(ev.data), &rec) != nil {
			continue
		}
		if open.IsZero() {
			open = ev.at
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if rec.Type == "role" && rec.Timestamp > open.UnixMilli() {
			late = append(late, ev.at.Sub(time.UnixMilli(rec.Timestamp)))
		}
	}
	if len(late) != 20 {
		t.Fatalf("%d steps were written after the stream opened, want all 20", len(late))
	}
	slices.Sort(late)
	median := late[len(late)/2]
	t.Logf("step timestamp → event at the client, %d steps: median %v, fastest %v, slowest %v",
		len(late), median.Round(100*time.Microsecond), late[0].Round(100*time.Microsecond), late[len(late)-1].Round(100*time.Microsecond))
	if median > 50*time.Millisecond {
		t.Errorf("median step latency %v, want within 50ms: %v", median, late)
	}

	// Held at its second step until the test is over.
	gate = filepath.Join(t.TempDir(), "slow-gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	id = startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow")
	evs = g.openLiveStream(t, "pushed", id)
	for {
		ev, ok := nextLive(t, evs)
		if !ok || ev.name == "done" {
			t.Fatalf("the stream ended before the first step: %+v", ev)
		}
		if ev.name == "record" && strings.Contains(ev.data, `"type":"role"`) {
			break
		}
	}
	stopHost(t, root, syscall.SIGKILL)
	for {
		ev, ok := nextLive(t, evs)
		if !ok {
			t.Fatal("the stream ended without done after the host was killed")
		}
		if ev.name == "done" {
			if ev.data != `{"reason":"not-running"}` {
				t.Fatalf("done after the host was killed: %s", ev.data)
			}
			break
		}
	}
}
