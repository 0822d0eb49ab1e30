package cluster

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestReplaySendsTheBodyWholeAfterAnyTurnedAwayAttempts: whatever the
// body's size, however the attempts before read it (chunk sizes, how far
// they got) and however many were turned away, the attempt after them —
// or a plain Read once the last was turned away — gives the body whole,
// from its first byte, and a turned-away attempt's reader gives nothing
// more. When attempts read further than what is kept, the body can no
// longer be sent again, and turnedAway says so.
func TestReplaySendsTheBodyWholeAfterAnyTurnedAwayAttempts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	sizes := []int{1, 7, 4096, 100_000, replayKeep - 1, replayKeep, replayKeep + 1, replayKeep + 300_000}
	for round := range 64 {
		size := sizes[round%len(sizes)]
		body := make([]byte, size)
		_, _ = rand.NewChaCha8([32]byte{byte(round)}).Read(body)
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		p := Replayable(r)
		if p == nil || r.Body != p || Replayable(r) != p {
			t.Fatal("Replayable did not make the body a Replay once")
		}
		turnedAway := 0
		furthest := 0
		for range rng.IntN(4) {
			a := p.attempt()
			got := readSome(t, a, rng.IntN(size+1), rng)
			if !bytes.Equal(got, body[:len(got)]) {
				t.Fatalf("round %d: an attempt read other bytes than the body's first %d", round, len(got))
			}
			furthest = max(furthest, len(got))
			ok := p.turnedAway(a)
			if want := furthest <= replayKeep; ok != want {
				t.Fatalf("round %d: turnedAway after reading %d of %d bytes = %v, want %v", round, furthest, size, ok, want)
			}
			if !ok {
				break
			}
			turnedAway++
			if n, err := a.Read(make([]byte, 10)); n != 0 || !errors.Is(err, errAttemptCut) {
				t.Fatalf("round %d: a turned-away attempt read %d bytes, %v", round, n, err)
			}
		}
		if furthest > replayKeep {
			continue // cannot be sent again; nothing reads it again
		}
		var rest io.Reader = p // whoever serves it in the end
		if rng.IntN(2) == 0 {
			rest = p.attempt() // or one more forward
		}
		got, err := io.ReadAll(rest)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("round %d (%d bytes, %d turned away): read %d bytes, %v; want the body whole", round, size, turnedAway, len(got), err)
		}
		// Given back: nothing reads what was kept any more.
		p.Release()
		if n, err := p.attempt().Read(make([]byte, 10)); n != 0 || !errors.Is(err, errAttemptCut) {
			t.Fatalf("round %d: an attempt after Release read %d bytes, %v", round, n, err)
		}
	}
}

// readSome reads n bytes of r in random chunks.
func readSome(t *testing.T, r io.Reader, n int, rng *rand.Rand) []byte {
	t.Helper()
	var out []byte
	for len(out) < n {
		buf := make([]byte, min(n-len(out), 1+rng.IntN(70_000)))
		k, err := r.Read(buf)
		out = append(out, buf[:k]...)
		if err != nil {
			break
		}
	}
	return out
}

// TestReplayGivesAnAbandonedAttemptsLastReadToTheNext: the transport of
// a turned-away attempt may still be reading when the next attempt
// starts — its read returns later with bytes of the body. Those bytes are
// not lost: the next attempt gets them, in order. An attempt that has
// read beyond what is kept cannot be turned away.
func TestReplayGivesAnAbandonedAttemptsLastReadToTheNext(t *testing.T) {
	for _, first := range []int{10, replayKeep, replayKeep + 1} {
		body := make([]byte, first+10)
		for i := range body {
			body[i] = byte('a' + i%26)
		}
		src, feed := io.Pipe()
		r := httptest.NewRequest("POST", "/", nil)
		r.Body = src
		p := Replayable(r)
		a := p.attempt()
		go func() { _, _ = feed.Write(body[:first]) }()
		if got := readSome(t, a, first, rand.New(rand.NewPCG(1, 2))); len(got) != first {
			t.Fatalf("read %d bytes, want %d", len(got), first)
		}
		if first > replayKeep {
			if p.turnedAway(a) {
				t.Fatalf("turned away after reading %d bytes, beyond the %d kept", first, replayKeep)
			}
			continue
		}
		// a reads on, blocked until the client sends more.
		var wg sync.WaitGroup
		var n int
		var err error
		wg.Go(func() { n, err = a.Read(make([]byte, 100)) })
		if !p.turnedAway(a) {
			t.Fatalf("could not turn away an attempt that read %d bytes", first)
		}
		go func() { _, _ = feed.Write(body[first:]); _ = feed.Close() }()
		wg.Wait()
		if n != 0 || !errors.Is(err, errAttemptCut) {
			t.Fatalf("the abandoned attempt's last read: %d, %v", n, err)
		}
		got, err := io.ReadAll(p.attempt())
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("the next attempt read %d bytes, %v; want the %d of the body", len(got), err, len(body))
		}
	}
}

// TestAReplicaThatDoesNotHoldTheConnectorTurnsTheForwardAway: a holder's
// NotHeldHeader answer is not passed on when the request can go again —
// no body, or one made Replayable (even when the holder read some of
// it) — and Forward says NotHeld; a body that is not Replayable and was
// sent cannot go again, so the holder's 503 is the client's answer, and
// the header, which means nothing to a client, is not. (Whether a body
// the holder did not read was sent is the transport's affair: HTTP/2
// sends it into the stream's window unasked.)
func TestAReplicaThatDoesNotHoldTheConnectorTurnsTheForwardAway(t *testing.T) {
	t.Parallel()
	holder := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Read") != "" {
			_, _ = io.ReadFull(r.Body, make([]byte, 5))
		}
		w.Header().Set(NotHeldHeader, "1")
		http.Error(w, `{"error":"connector laptop is not held by this gateway replica"}`, http.StatusServiceUnavailable)
	}))
	for _, tc := range []struct {
		name             string
		body             string
		replayable, read bool
		want             Outcome
	}{
		{"no body", "", false, false, NotHeld},
		{"read body", "0123456789", false, true, Answered},
		{"replayable unread", "0123456789", true, false, NotHeld},
		{"replayable read", "0123456789", true, true, NotHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, _ := pair(t)
			var out Outcome
			var rest string
			fr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.replayable {
					Replayable(r)
				}
				out = from.Forward(w, r, Route{Replica: "r2", Advertise: holder.URL, Online: true})
				if out != Answered {
					b, _ := io.ReadAll(r.Body)
					rest = string(b)
					w.WriteHeader(299)
				}
			}))
			defer fr.Close()
			req, _ := http.NewRequest("POST", fr.URL+"/api/clients/laptop/threads", strings.NewReader(tc.body))
			if tc.read {
				req.Header.Set("X-Read", "1")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if out != tc.want {
				t.Fatalf("outcome %d, want %d", out, tc.want)
			}
			if out == Answered {
				if resp.StatusCode != 503 || resp.Header.Get(NotHeldHeader) != "" {
					t.Fatalf("passed on: %d %v", resp.StatusCode, resp.Header)
				}
				return
			}
			if resp.StatusCode != 299 || rest != tc.body {
				t.Fatalf("status %d, body left %q; want the caller's 299 and the body whole", resp.StatusCode, rest)
			}
			if got := counterValue(t, from, resultNotHeld); got != 1 {
				t.Fatalf("forwards not held = %v", got)
			}
		})
	}
}
