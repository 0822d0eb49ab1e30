package spool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// errAway is the destination being away; errRefused it refusing a record.
var (
	errAway    = errors.New("away")
	errRefused = errors.New("refused")
)

// destination is where the tests' queues write: it can be away, lose the
// acknowledgement of a write it made (the record is written, the writer
// told it is away), and refuse records whose text says so.
type destination struct {
	mu      sync.Mutex
	away    bool
	loseAck int // the next loseAck writes are made but answered errAway
	written []string
	writes  map[string]int
}

func newDestination() *destination { return &destination{writes: map[string]int{}} }

func (d *destination) write(_ context.Context, rec []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.away:
		return errAway
	case strings.HasPrefix(string(rec), "refuse"):
		return errRefused
	}
	d.written = append(d.written, string(rec))
	d.writes[string(rec)]++
	if d.loseAck > 0 {
		d.loseAck--
		return errAway
	}
	return nil
}

func (d *destination) setAway(away bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.away = away
}

func (d *destination) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.written)
}

// firstOccurrences is written without repeats, in the order each record
// was first written.
func firstOccurrences(written []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range written {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// firstDifference is the first index where a and b differ, -1 when they
// are equal.
func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// drops records what OnDrop was told.
type drops struct {
	mu  sync.Mutex
	why map[string]DropReason
}

func (d *drops) onDrop(rec []byte, reason DropReason, _ error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.why == nil {
		d.why = map[string]DropReason{}
	}
	d.why[string(rec)] = reason
}

func (d *drops) reason(rec string) (DropReason, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.why[rec]
	return r, ok
}

func openQueue(t *testing.T, dir string, dest *destination, dr *drops, maxMemory, maxDisk int64) *Queue {
	t.Helper()
	q, err := Open(Options{Dir: dir, MaxMemory: maxMemory, MaxDisk: maxDisk, Write: dest.write,
		Unavailable: func(err error) bool { return errors.Is(err, errAway) }, OnDrop: dr.onDrop,
		RetryMin: 1e5, RetryMax: 1e6}) // 0.1 to 1 ms: the tests toggle the destination often
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	return q
}

// started opens and starts a queue.
func started(t *testing.T, opts Options) (*Queue, error) {
	t.Helper()
	q, err := Open(opts)
	q.Start()
	return q, err
}

// kill ends q as kill -9 ends its process: the writer stops, the file is
// closed as it is (its lock released), and memory is lost. It returns
// what memory held.
func kill(q *Queue) []string {
	q.stop()
	<-q.done
	q.mu.Lock()
	defer q.mu.Unlock()
	var lost []string
	for _, e := range q.mem[q.memHead:] {
		lost = append(lost, string(e.rec))
	}
	if q.file != nil {
		_ = q.file.f.Close() // as the kernel would
	}
	q.closed = true
	return lost
}

// Randomized interleavings of adds, the destination going away and
// coming back, acknowledgements lost, clean restarts and kills, under
// bounds small enough that records spill and are dropped: every record
// taken is written, in the order it was added, unless it was dropped
// (said so) or in memory when its process was killed; a record is
// written twice only after a lost acknowledgement or a kill; memory and
// the file never pass their bounds; and once the destination answers
// the queue empties.
func TestRandomOutagesLoseAndReorderNothing(t *testing.T) {
	t.Parallel()
	for seed := range uint64(24) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			dir := t.TempDir()
			dest, dr := newDestination(), &drops{}
			maxMemory, maxDisk := int64(20+rng.IntN(200)), int64(200+rng.IntN(2000))
			q := openQueue(t, dir, dest, dr, maxMemory, maxDisk)
			var taken []string // in the order added
			lost := map[string]bool{}
			repeatsAllowed := 0
			next := 0
			for step := range 300 {
				switch op := rng.IntN(20); {
				case op < 11:
					for range 1 + rng.IntN(4) {
						rec := fmt.Sprintf("r%04d-%s", next, strings.Repeat("x", rng.IntN(30)))
						next++
						if q.Add([]byte(rec)) {
							taken = append(taken, rec)
						} else if r, ok := dr.reason(rec); !ok || r != DropFull {
							t.Fatalf("step %d: %s not taken, and OnDrop told %q", step, rec, r)
						}
					}
				case op < 14:
					dest.setAway(true)
				case op < 17:
					dest.setAway(false)
					q.Kick()
				case op < 18:
					dest.mu.Lock()
					dest.loseAck++
					dest.mu.Unlock()
					repeatsAllowed++
				case op < 19:
					// A clean restart: Close keeps memory in the file.
					if err := q.Close(context.Background()); err != nil && !errors.Is(err, ErrNotKept) {
						t.Fatal(err)
					}
					q = openQueue(t, dir, dest, dr, maxMemory, maxDisk)
					repeatsAllowed++ // the record in flight when Close stopped the writer
				default:
					for _, rec := range kill(q) {
						lost[rec] = true
					}
					q = openQueue(t, dir, dest, dr, maxMemory, maxDisk)
					repeatsAllowed++
				}
				s := q.Stats()
				if s.MemoryBytes > maxMemory || s.DiskBytes > maxDisk {
					t.Fatalf("step %d: %d bytes in memory (bound %d), %d in the file (bound %d)", step, s.MemoryBytes, maxMemory, s.DiskBytes, maxDisk)
				}
			}
			dest.setAway(false)
			dest.mu.Lock()
			dest.loseAck = 0
			dest.mu.Unlock()
			q.Kick()
			testkit.WaitUntil(t, "the queue to empty", func() bool { return q.Stats().Pending() == 0 })
			var want []string
			for _, rec := range taken {
				if _, dropped := dr.reason(rec); !dropped && !lost[rec] {
					want = append(want, rec)
				}
			}
			written := dest.seen()
			first := firstOccurrences(written)
			// A record in memory when its process was killed may have been
			// written all the same (its acknowledgement lost).
			got := slices.DeleteFunc(slices.Clone(first), func(rec string) bool { return lost[rec] })
			if i := firstDifference(got, want); i >= 0 {
				t.Fatalf("written (first times, less what was lost in a kill) differ from what was taken, less what was dropped or lost, at %d of %d/%d: got %v, want %v",
					i, len(got), len(want), got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
			}
			if repeats := len(written) - len(first); repeats > repeatsAllowed {
				t.Fatalf("%d records written twice, with only %d lost acknowledgements, restarts and kills", repeats, repeatsAllowed)
			}
			if err := q.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "spool-*.log")); len(left) != 0 {
				t.Fatalf("an empty queue left its file: %v", left)
			}
		})
	}
}

// Past memory the oldest records go to the file; past the file's bound
// new ones are dropped and counted, and only then.
func TestBoundsSpillThenDrop(t *testing.T) {
	t.Parallel()
	dest, dr := newDestination(), &drops{}
	dest.setAway(true)
	q := openQueue(t, t.TempDir(), dest, dr, 10, 3*frameSize(5))
	defer func() { _ = q.Close(context.Background()) }()
	for i := range 6 {
		q.Add(fmt.Appendf(nil, "rec-%d", i)) // 5 bytes each
	}
	s := q.Stats()
	// Memory holds two (10 bytes), the file three, and the sixth would
	// have pushed a fourth to the file.
	if s.MemoryRecords != 2 || s.DiskRecords != 3 || s.Dropped != 1 || s.Added != 5 {
		t.Fatalf("%+v", s)
	}
	if r, _ := dr.reason("rec-5"); r != DropFull {
		t.Fatalf("rec-5 dropped as %q", r)
	}
	dest.setAway(false)
	q.Kick()
	testkit.WaitUntil(t, "the queue to empty", func() bool { return q.Stats().Pending() == 0 })
	if got := dest.seen(); !slices.Equal(got, []string{"rec-0", "rec-1", "rec-2", "rec-3", "rec-4"}) {
		t.Fatalf("written %v", got)
	}
}

// Without a directory, records past memory are dropped; with one that
// cannot be used, the queue says so and keeps records in memory.
func TestWithoutAFileMemoryIsTheBound(t *testing.T) {
	t.Parallel()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", notADir} {
		dest, dr := newDestination(), &drops{}
		dest.setAway(true)
		q, err := started(t, Options{Dir: dir, MaxMemory: 10, Write: dest.write, OnDrop: dr.onDrop})
		if (err != nil) != (dir != "") {
			t.Fatalf("dir %q: %v", dir, err)
		}
		for i := range 3 {
			q.Add(fmt.Appendf(nil, "rec-%d", i))
		}
		if s := q.Stats(); s.MemoryRecords != 2 || s.Dropped != 1 || s.Spilling {
			t.Fatalf("dir %q: %+v", dir, s)
		}
		if err := q.Close(context.Background()); !errors.Is(err, ErrNotKept) {
			t.Fatalf("dir %q: Close kept what it could not: %v", dir, err)
		}
		if r, _ := dr.reason("rec-1"); r != DropClosed {
			t.Fatalf("dir %q: rec-1 dropped as %q", dir, r)
		}
	}
}

// A record the destination refuses (rather than being away) is tried
// MaxAttempts times, then dropped with the destination's error; the
// records behind it are written.
func TestARefusedRecordIsDroppedAfterItsAttempts(t *testing.T) {
	t.Parallel()
	dest := newDestination()
	var mu sync.Mutex
	var dropErr error
	q, err := started(t, Options{Write: dest.write, Unavailable: func(err error) bool { return errors.Is(err, errAway) },
		OnDrop: func(rec []byte, reason DropReason, err error) {
			mu.Lock()
			defer mu.Unlock()
			if reason == DropRefused {
				dropErr = err
			}
		}, RetryMin: 1e5})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Close(context.Background()) }()
	q.Add([]byte("refuse-me"))
	q.Add([]byte("after"))
	testkit.WaitUntil(t, "the queue to empty", func() bool { return q.Stats().Pending() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(dropErr, errRefused) || !slices.Equal(dest.seen(), []string{"after"}) {
		t.Fatalf("dropped with %v; written %v", dropErr, dest.seen())
	}
}

// A file whose last record was cut short (a kill in the middle of a
// write) is read up to it; a file that is not a spill file is refused,
// and the queue keeps records in memory.
func TestACutRecordEndsTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest, dr := newDestination(), &drops{}
	dest.setAway(true)
	q := openQueue(t, dir, dest, dr, 1, 1<<20)
	for i := range 3 {
		q.Add(fmt.Appendf(nil, "rec-%d", i))
	}
	kill(q)
	path := filepath.Join(dir, "spool-0.log")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-2); err != nil {
		t.Fatal(err)
	}
	dest.setAway(false)
	q = openQueue(t, dir, dest, dr, 1, 1<<20)
	testkit.WaitUntil(t, "the queue to empty", func() bool { return q.Stats().Pending() == 0 })
	if got := dest.seen(); !slices.Equal(got, []string{"rec-0", "rec-1"}) {
		t.Fatalf("written %v", got)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("something else entirely"), 0o600); err != nil {
		t.Fatal(err)
	}
	if q, err := Open(Options{Dir: dir, Write: dest.write}); err == nil || !strings.Contains(err.Error(), "not a spill file") {
		t.Fatalf("opened over another file: %v", err)
	} else if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Two queues on one directory take a file each; a third after the
// first has gone takes the first's file and writes its records.
func TestEachProcessTakesAFileOfItsOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest, dr := newDestination(), &drops{}
	dest.setAway(true)
	a := openQueue(t, dir, dest, dr, 1, 1<<20)
	b := openQueue(t, dir, dest, dr, 1, 1<<20)
	defer func() { _ = b.Close(context.Background()) }()
	if a.file.path == b.file.path {
		t.Fatalf("both took %s", a.file.path)
	}
	a.Add([]byte("from-a"))
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	dest.setAway(false)
	c := openQueue(t, dir, dest, dr, 1, 1<<20)
	defer func() { _ = c.Close(context.Background()) }()
	testkit.WaitUntil(t, "a's record to be written", func() bool { return slices.Contains(dest.seen(), "from-a") })
}

// WaitRoom holds a producer while the destination answers and memory is
// half full, and lets it go at once while the destination is away.
func TestWaitRoomHoldsOnlyWhileTheDestinationAnswers(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var once sync.Once
	q, err := started(t, Options{MaxMemory: 10, Write: func(ctx context.Context, rec []byte) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { once.Do(func() { close(gate) }); _ = q.Close(context.Background()) }()
	q.Add([]byte("123456"))
	released := make(chan struct{})
	go func() { q.WaitRoom(context.Background()); close(released) }()
	select {
	case <-released:
		t.Fatal("WaitRoom returned with memory more than half full and the destination answering")
	default:
	}
	once.Do(func() { close(gate) })
	testkit.WaitUntil(t, "WaitRoom to return once the record is written", func() bool {
		select {
		case <-released:
			return true
		default:
			return false
		}
	})
}

// While the destination is away WaitRoom never holds a producer: its
// records go to the file instead, where they outlive the process.
func TestWaitRoomLetsGoWhileTheDestinationIsAway(t *testing.T) {
	t.Parallel()
	dest := newDestination()
	dest.setAway(true)
	q, err := started(t, Options{MaxMemory: 10, Write: dest.write, RetryMin: 1e5})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Close(context.Background()) }()
	q.Add([]byte("123456"))
	testkit.WaitUntil(t, "the destination to be found away", func() bool { return q.Stats().Away })
	q.WaitRoom(context.Background()) // returns: a hang here fails by the test's timeout
}

// With a memory bound smaller than any record, an empty memory holds no
// producer: everything goes to the file, and WaitRoom never waits on a
// memory that cannot fill.
func TestWaitRoomNeverHoldsOnAnEmptyMemory(t *testing.T) {
	t.Parallel()
	dest := newDestination()
	q, err := started(t, Options{Dir: t.TempDir(), MaxMemory: 1, Write: dest.write})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Close(context.Background()) }()
	for i := range 3 {
		q.WaitRoom(context.Background()) // returns: a hang here fails by the test's timeout
		q.Add(fmt.Appendf(nil, "rec-%d", i))
	}
	testkit.WaitUntil(t, "the three records to be written", func() bool { return len(dest.seen()) == 3 })
}
