package eventstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

func TestIs(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"text/event-stream":                true,
		"text/event-stream; charset=utf-8": true,
		"Text/Event-Stream":                true,
		"application/json":                 false,
		"text/event-streams":               false,
		"":                                 false,
		";;":                               false,
	} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if got := Is(h); got != want {
			t.Errorf("Is(%q) = %v, want %v", ct, got, want)
		}
	}
}

// events is a random stream: its bytes, and every position where a
// client has every event it got whole: the start, each event's end, and
// for an event ending in CRLF CRLF one byte earlier, where its CR already
// ends the blank line.
func events(r *rand.Rand) (stream []byte, whole []int) {
	var b bytes.Buffer
	whole = []int{0}
	for i := range 1 + r.IntN(20) {
		nl := []string{"\n", "\r\n", "\r"}[r.IntN(3)]
		if r.IntN(5) == 0 {
			b.WriteString(": ping" + nl + nl)
		} else {
			fmt.Fprintf(&b, "id: %d:%d%sevent: record%sdata: %s%s%s", i, r.IntN(1000), nl, nl, strings.Repeat("x", r.IntN(3000)), nl, nl)
		}
		if nl == "\r\n" {
			whole = append(whole, b.Len()-1)
		}
		whole = append(whole, b.Len())
	}
	return b.Bytes(), whole
}

// relayed is a stream as a relay copies it: from an upstream written in
// random pieces, through a Set's wrapper, to what the client got.
type relayed struct {
	body io.ReadCloser
	up   *io.PipeWriter

	mu     sync.Mutex
	got    []byte
	err    error
	copied chan struct{} // closed when the copy has ended
}

func relay(s *Set) *relayed {
	pr, pw := io.Pipe()
	x := &relayed{body: s.Wrap(pr), up: pw, copied: make(chan struct{})}
	go func() {
		defer close(x.copied)
		buf := make([]byte, 1+rand.IntN(8192))
		for {
			n, err := x.body.Read(buf)
			x.mu.Lock()
			x.got = append(x.got, buf[:n]...)
			if err != nil {
				x.err = err
			}
			x.mu.Unlock()
			if err != nil {
				_ = x.body.Close() // a pipe's close does not fail
				return
			}
		}
	}()
	return x
}

// write sends p upstream in random pieces.
func (x *relayed) write(r *rand.Rand, p []byte) {
	for len(p) > 0 {
		n := min(len(p), 1+r.IntN(5000))
		if _, err := x.up.Write(p[:n]); err != nil {
			return // the wrapper was closed: nobody reads any more
		}
		p = p[n:]
	}
}

func (x *relayed) received() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.got)
}

// A stream ends, once its set ends, at the first point at or after where
// its client was where the client has every event it got whole — at once
// when that is where it is, else when the event it is in has arrived —
// and never with a byte more: the rest of the upstream is not handed out.
func TestAStreamEndsWhereItsClientHasEveryEventWhole(t *testing.T) {
	t.Parallel()
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		stream, whole := events(r)
		// Where the client is when the set ends: an event's end, or
		// anywhere.
		at := r.IntN(len(stream) + 1)
		if r.IntN(2) == 0 {
			at = whole[r.IntN(len(whole))]
		}
		s := NewSet()
		x := relay(s)
		go func() { x.write(r, stream[:at]) }()
		testkit.WaitUntil(t, fmt.Sprintf("seed %d: the client to have %d bytes", seed, at), func() bool { return x.received() == at })
		ended := make(chan int)
		go func() { ended <- s.End(context.Background()) }()
		want := at
		if i, found := slices.BinarySearch(whole, at); !found {
			want = whole[i]
		}
		if at != want {
			// In the middle of an event: the rest comes, and more, once
			// the set has ended.
			<-s.ctx.Done()
			go x.write(rand.New(rand.NewPCG(seed, 8)), stream[at:])
		}
		if open := <-ended; open != 0 {
			t.Fatalf("seed %d: End left %d open", seed, open)
		}
		<-x.copied
		if x.err != io.EOF || !bytes.Equal(x.got, stream[:want]) {
			t.Fatalf("seed %d: ended at %d with %v after %d of %d bytes, want at %d (the client was at %d)\n%q",
				seed, len(x.got), x.err, len(x.got), len(stream), want, at, x.got[max(0, len(x.got)-40):])
		}
		_ = x.up.Close() // a pipe's close does not fail
	}
}

// Until its set ends a stream passes through whole, and the upstream's
// error with it.
func TestAStreamPassesThroughUntilItsSetEnds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	stream, _ := events(r)
	broke := errors.New("the connector went away")
	for _, end := range []error{nil, broke} {
		x := relay(NewSet())
		go func() {
			x.write(r, stream)
			_ = x.up.CloseWithError(end) // a pipe's close does not fail
		}()
		<-x.copied
		want := end
		if want == nil {
			want = io.EOF
		}
		if !bytes.Equal(x.got, stream) || x.err != want {
			t.Fatalf("got %d of %d bytes, then %v (want %v)", len(x.got), len(stream), x.err, want)
		}
	}
}

// A stream its upstream leaves in the middle of an event is still open
// when End gives up, and says so; it ends once the event is whole. A
// stream opened after the end ends at once, before its first byte.
func TestEndCountsAStreamStuckInAnEvent(t *testing.T) {
	t.Parallel()
	s := NewSet()
	x := relay(s)
	r := rand.New(rand.NewPCG(3, 4))
	half := "id: 1\ndata: a\n\nid: 2\ndata: b"
	x.write(r, []byte(half))
	testkit.WaitUntil(t, "the client to have the first event and half the second", func() bool { return x.received() == len(half) })
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	if open := s.End(gaveUp); open != 1 || s.Open() != 1 {
		t.Fatalf("End counts %d open, Open %d; want the stuck one", open, s.Open())
	}
	go x.write(r, []byte("\n\nid: 3\ndata: c\n\n"))
	if open := s.End(context.Background()); open != 0 {
		t.Fatalf("End left %d open once the event was whole", open)
	}
	<-x.copied
	if string(x.got) != "id: 1\ndata: a\n\nid: 2\ndata: b\n\n" || x.err != io.EOF {
		t.Fatalf("got %q, %v", x.got, x.err)
	}

	late := relay(s)
	go late.write(r, []byte("id: 4\ndata: d\n\n"))
	<-late.copied
	if len(late.got) != 0 || late.err != io.EOF {
		t.Fatalf("a stream opened after the end: %q, %v", late.got, late.err)
	}
	if s.Open() != 0 {
		t.Fatalf("%d open after every stream closed", s.Open())
	}
}

// A sub-set's end ends its own streams only, and its parent counts them;
// the parent's end ends the sub-set's streams with its own.
func TestASubSetEndsItsOwnStreamsAndItsParentsEndEndsThem(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	whole := []byte("id: 1\ndata: a\n\n")
	parent := NewSet()
	moving, staying := parent.Sub(), parent.Sub()
	a, b, c := relay(moving), relay(staying), relay(parent)
	for _, x := range []*relayed{a, b, c} {
		x.write(r, whole)
		testkit.WaitUntil(t, "the client to have the first event", func() bool { return x.received() == len(whole) })
	}
	if parent.Open() != 3 || moving.Open() != 1 || staying.Open() != 1 {
		t.Fatalf("open: parent %d, subs %d and %d; want 3, 1, 1", parent.Open(), moving.Open(), staying.Open())
	}
	if open := moving.End(context.Background()); open != 0 {
		t.Fatalf("the sub-set's End left %d open", open)
	}
	<-a.copied
	if a.err != io.EOF || parent.Open() != 2 || staying.Open() != 1 {
		t.Fatalf("after the sub-set's end: its stream %v, parent %d open, other sub-set %d; want EOF, 2, 1", a.err, parent.Open(), staying.Open())
	}
	if open := parent.End(context.Background()); open != 0 {
		t.Fatalf("the parent's End left %d open", open)
	}
	for _, x := range []*relayed{b, c} {
		<-x.copied
		if x.err != io.EOF || !bytes.Equal(x.got, whole) {
			t.Fatalf("after the parent's end a stream got %q and %v", x.got, x.err)
		}
	}
	if staying.Open() != 0 {
		t.Fatalf("the other sub-set still counts %d open", staying.Open())
	}
	for _, x := range []*relayed{a, b, c} {
		_ = x.up.Close() // a pipe's close does not fail
	}
}

// TestOwnedStreamsAreCountedAndEnded: a stream the gateway writes itself
// counts as open in its set and its parents until done; End tells it to
// end (ending closes) and waits for done; done twice counts once.
func TestOwnedStreamsAreCountedAndEnded(t *testing.T) {
	t.Parallel()
	parent := NewSet()
	sub := parent.Sub()
	ending, done := sub.Own()
	if parent.Open() != 1 || sub.Open() != 1 {
		t.Fatalf("open: parent %d, sub %d", parent.Open(), sub.Open())
	}
	select {
	case <-ending:
		t.Fatal("ending before End")
	default:
	}
	ended := make(chan int, 1)
	go func() { ended <- parent.End(context.Background()) }()
	<-ending
	select {
	case n := <-ended:
		t.Fatalf("End returned %d before the owned stream was done", n)
	default:
	}
	done()
	done()
	if n := <-ended; n != 0 || parent.Open() != 0 || sub.Open() != 0 {
		t.Fatalf("after done: End %d, parent %d, sub %d open", n, parent.Open(), sub.Open())
	}
}
