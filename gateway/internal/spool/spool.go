// Package spool is a queue of records on their way to a destination that
// may be away for a while — the gateway's store during a database outage.
//
// Records are written by one goroutine, one at a time and in the order
// they were added. A record the destination did not take stays at the
// head until it does, so nothing overtakes it: while the destination is
// away (Options.Unavailable says so of the error) the head is retried
// until it answers, with a growing pause; a record the destination
// refuses for what it is, rather than for being away, is tried
// MaxAttempts times and then dropped.
//
// The queue keeps its newest records in memory, up to Options.MaxMemory
// bytes. Past that its oldest records spill to a file in Options.Dir, up
// to Options.MaxDisk bytes, so the file always holds the oldest records
// and memory the newest: the writer reads the file first. Past both
// bounds a new record is dropped, and said so (Options.OnDrop). Close
// moves what is left in memory to the file, and a queue opened later on
// the same directory (the process restarted) takes the file and writes
// its records first; a process killed without Close loses what was in
// memory only. The file is not synced: a kill of the process keeps what
// was written to it, a power cut may not.
//
// Records are written at least once: one written whose acknowledgement
// was lost (the process died in between, the connection dropped after
// the commit) is written again, so the destination must take a record
// twice as once (the gateway gives each audit entry a key).
package spool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultMaxMemory is Options.MaxMemory when zero: the records of a
	// few minutes of a busy fleet's changes.
	DefaultMaxMemory = 16 << 20
	// DefaultMaxDisk is Options.MaxDisk when zero.
	DefaultMaxDisk = 1 << 30
	// DefaultRetryMin and DefaultRetryMax bound the pause between two
	// attempts at the head record when it was not written.
	DefaultRetryMin = 100 * time.Millisecond
	DefaultRetryMax = 5 * time.Second
	// MaxAttempts is how often a record the destination refuses (for
	// another reason than being away) is tried before it is dropped.
	MaxAttempts = 3
)

// DropReason says why a record was dropped.
type DropReason string

// Reasons a record is dropped.
const (
	// DropFull: memory and the file were both full when it came.
	DropFull DropReason = "full"
	// DropRefused: the destination refused it MaxAttempts times.
	DropRefused DropReason = "refused"
	// DropClosed: it came after Close, or was in memory when Close could
	// not keep it in the file.
	DropClosed DropReason = "closed"
)

// Options configure a Queue.
type Options struct {
	// Dir holds the spill file; "" keeps records in memory only.
	Dir string
	// MaxMemory bounds the bytes of records kept in memory (0:
	// DefaultMaxMemory); MaxDisk those of the spill file (0:
	// DefaultMaxDisk).
	MaxMemory, MaxDisk int64
	// Write writes one record to the destination; nil means written.
	Write func(ctx context.Context, rec []byte) error
	// Unavailable says whether an error of Write means the destination is
	// away (the record is retried until it answers) rather than that it
	// refused the record. Nil: every error means away.
	Unavailable func(error) bool
	// OnDrop is told of every record dropped, with why and, for
	// DropRefused, the destination's last error. It may be called with
	// the queue's lock held: it must not call the queue.
	OnDrop func(rec []byte, reason DropReason, err error)
	// OnWritten is told of every record written, in order, from the
	// writer's goroutine.
	OnWritten func(rec []byte)
	// OnAway is told, from the writer's goroutine, when a Write found the
	// destination away (the error), and OnBack when one succeeded after
	// that.
	OnAway func(err error)
	OnBack func()
	// RetryMin and RetryMax bound the pause between attempts (0: the
	// defaults).
	RetryMin, RetryMax time.Duration
}

// Stats is what a queue holds and has done.
type Stats struct {
	// MemoryRecords and MemoryBytes wait in memory; DiskRecords and
	// DiskBytes in the spill file.
	MemoryRecords int
	MemoryBytes   int64
	DiskRecords   int
	DiskBytes     int64
	// Added counts the records taken (replayed ones included), Written
	// those written, Dropped those dropped, since the queue was opened.
	Added, Written, Dropped uint64
	// Away says whether the last attempt found the destination away.
	Away bool
	// Spilling says whether records spill to a file (false: there is
	// none, and past MaxMemory records are dropped).
	Spilling bool
}

// Pending is how many records wait.
func (s Stats) Pending() int { return s.MemoryRecords + s.DiskRecords }

// entry is a record in memory, with its place in the order.
type entry struct {
	seq uint64
	rec []byte
}

// Queue is a spool. Its methods are safe for concurrent use.
type Queue struct {
	opts Options

	mu sync.Mutex
	// mem holds the newest records, oldest first, from memHead on.
	mem      []entry
	memHead  int
	memBytes int64
	// file holds the oldest records; nil without one.
	file *spillFile
	// headSeq is the place of the oldest waiting record, and nextSeq of
	// the next one added: the file holds [headSeq, headSeq+file.records)
	// and memory the rest up to nextSeq.
	headSeq, nextSeq uint64
	// fileHead caches the file's first record, read once for its retries.
	fileHead []byte
	stats    Stats
	closed   bool
	// changed is closed and replaced at every change that can let a
	// waiter (next, WaitRoom) on.
	changed chan struct{}

	kick chan struct{}
	// stop ends the writer (nil until Start); done is closed when it has.
	stop context.CancelFunc
	done chan struct{}
}

// Open opens a queue; Start starts its writer. A spill file left in Dir
// by a process that is gone is taken and its records are written first.
// A Dir that cannot be used is no failure: the queue keeps records in
// memory only, and the error says why (the queue is never nil).
func Open(opts Options) (*Queue, error) {
	if opts.MaxMemory <= 0 {
		opts.MaxMemory = DefaultMaxMemory
	}
	if opts.MaxDisk <= 0 {
		opts.MaxDisk = DefaultMaxDisk
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryMin)
	}
	if opts.Unavailable == nil {
		opts.Unavailable = func(error) bool { return true }
	}
	q := &Queue{opts: opts, changed: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{}), headSeq: 1, nextSeq: 1}
	var err error
	if opts.Dir != "" {
		q.file, err = openSpill(opts.Dir)
		if err != nil {
			q.file = nil
			err = fmt.Errorf("spool: records are kept in memory only: %w", err)
		}
	}
	if q.file != nil {
		q.nextSeq += uint64(q.file.records)
		q.stats.Added = uint64(q.file.records)
		q.stats.Spilling = true
	}
	return q, err
}

// Start starts the writer: records added before wait until it runs, so
// that what the callbacks reach can be set up after Open. Starting twice
// does nothing.
func (q *Queue) Start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stop != nil || q.closed {
		return
	}
	var ctx context.Context
	ctx, q.stop = context.WithCancel(context.Background())
	go q.run(ctx)
}

// Add queues rec (the queue keeps it: the caller must not change it) and
// says whether it was taken; when it was not, OnDrop has been told why.
func (q *Queue) Add(rec []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.dropLocked(rec, DropClosed, nil)
		return false
	}
	size := int64(len(rec))
	if q.memBytes+size > q.opts.MaxMemory {
		switch q.makeRoomLocked(rec) {
		case roomNone:
			q.dropLocked(rec, DropFull, nil)
			return false
		case roomInFile:
			q.nextSeq++
			q.stats.Added++
			q.changedLocked()
			return true
		}
	}
	q.mem = append(q.mem, entry{seq: q.nextSeq, rec: rec})
	q.nextSeq++
	q.memBytes += size
	q.stats.Added++
	q.changedLocked()
	return true
}

// Where makeRoomLocked made room for a record.
const (
	roomNone   = iota // nowhere: both bounds are full
	roomMemory        // in memory, its oldest records spilled to the file
	roomInFile        // in the file, after everything memory held
)

// makeRoomLocked spills memory's oldest records to the file until rec
// fits in memory; a record larger than the memory bound alone goes to
// the file itself, after all of memory. All or nothing: roomNone, with
// nothing moved, when the file cannot take them within its bound.
func (q *Queue) makeRoomLocked(rec []byte) int {
	if q.file == nil {
		return roomNone
	}
	size := int64(len(rec))
	need := q.memBytes + size - q.opts.MaxMemory
	var freed, frames int64
	n := 0
	for i := q.memHead; i < len(q.mem) && freed < need; i++ {
		freed += int64(len(q.mem[i].rec))
		frames += frameSize(len(q.mem[i].rec))
		n++
	}
	where := roomMemory
	if freed < need {
		where = roomInFile
		frames += frameSize(len(rec))
	}
	if q.file.used()+frames > q.opts.MaxDisk {
		return roomNone
	}
	for range n {
		if q.moveHeadToFileLocked() != nil {
			// What moved stays moved (the order holds); the newest cannot
			// be kept.
			return roomNone
		}
	}
	if where == roomInFile && q.file.append(rec) != nil {
		return roomNone
	}
	return where
}

// moveHeadToFileLocked appends memory's oldest record to the file.
func (q *Queue) moveHeadToFileLocked() error {
	e := q.mem[q.memHead]
	if err := q.file.append(e.rec); err != nil {
		return err
	}
	q.popMemLocked()
	return nil
}

// popMemLocked forgets memory's oldest record.
func (q *Queue) popMemLocked() {
	e := q.mem[q.memHead]
	q.mem[q.memHead] = entry{}
	q.memHead++
	q.memBytes -= int64(len(e.rec))
	if q.memHead == len(q.mem) {
		q.mem, q.memHead = q.mem[:0], 0
	} else if q.memHead > 1024 && q.memHead*2 > len(q.mem) {
		q.mem = append(q.mem[:0], q.mem[q.memHead:]...)
		q.memHead = 0
	}
}

// dropLocked counts a record dropped and tells OnDrop.
func (q *Queue) dropLocked(rec []byte, reason DropReason, err error) {
	q.stats.Dropped++
	if q.opts.OnDrop != nil {
		q.opts.OnDrop(rec, reason, err)
	}
}

// changedLocked wakes whoever waits for a change.
func (q *Queue) changedLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// pendingLocked is how many records wait.
func (q *Queue) pendingLocked() int {
	n := len(q.mem) - q.memHead
	if q.file != nil {
		n += q.file.records
	}
	return n
}

// Kick makes the writer try the head record now rather than after its
// pause: the destination is known to answer again.
func (q *Queue) Kick() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Stats says what the queue holds and has done.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.MemoryRecords, s.MemoryBytes = len(q.mem)-q.memHead, q.memBytes
	if q.file != nil {
		s.DiskRecords, s.DiskBytes = q.file.records, q.file.pendingBytes()
	}
	return s
}

// Last is the place of the newest record added: Drained(Last()) says
// when everything added so far has been written (or dropped).
func (q *Queue) Last() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nextSeq - 1
}

// Drained says whether every record up to place upTo (Last) has left the
// queue.
func (q *Queue) Drained(upTo uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.headSeq > upTo
}

// WaitRoom waits, while the destination answers, until memory is empty
// or less than half full, so that a producer that can wait (one reading a stream
// it can slow down) does not spill to the file what the writer is about
// to write anyway. It returns at once while the destination is away or
// the queue is closed, and when ctx ends.
func (q *Queue) WaitRoom(ctx context.Context) {
	for {
		q.mu.Lock()
		ok := q.closed || q.stats.Away || q.memBytes == 0 || q.memBytes < q.opts.MaxMemory/2
		ch := q.changed
		q.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// next waits for the oldest record and returns it with its place; false
// when ctx ends.
func (q *Queue) next(ctx context.Context) (entry, bool) {
	for {
		q.mu.Lock()
		if q.file != nil && q.file.records > 0 {
			if q.fileHead == nil {
				rec, err := q.file.head()
				if err != nil {
					// The file cannot be read back past here: what it holds
					// from here on is lost, said once per record.
					q.loseFileLocked(err)
					q.mu.Unlock()
					continue
				}
				q.fileHead = rec
			}
			e := entry{seq: q.headSeq, rec: q.fileHead}
			q.mu.Unlock()
			return e, true
		}
		if q.memHead < len(q.mem) {
			e := q.mem[q.memHead]
			q.mu.Unlock()
			return e, true
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return entry{}, false
		}
	}
}

// loseFileLocked drops what the file holds when it cannot be read back.
func (q *Queue) loseFileLocked(err error) {
	n := q.file.records
	_ = q.file.reset() // what it held is lost either way
	q.fileHead = nil
	q.headSeq += uint64(n)
	for range n {
		q.dropLocked(nil, DropRefused, fmt.Errorf("spool: reading the spill file: %w", err))
	}
	q.changedLocked()
}

// removeLocked takes e, the oldest record, out of the queue, wherever it
// is now (a spill may have moved it from memory to the file meanwhile).
func (q *Queue) removeLocked(e entry) {
	if e.seq != q.headSeq {
		return // gone already (the file lost)
	}
	if q.file != nil && q.file.records > 0 {
		// A failure to note it consumed leaves it unread in the file, and
		// a restart writes it again, which the destination takes as once.
		_ = q.file.consume()
		q.fileHead = nil
	} else {
		q.popMemLocked()
	}
	q.headSeq++
	q.changedLocked()
}

// run is the writer: it writes the oldest record until ctx ends.
func (q *Queue) run(ctx context.Context) {
	defer close(q.done)
	pause := q.opts.RetryMin
	attempts := 0
	for {
		e, ok := q.next(ctx)
		if !ok {
			return
		}
		err := q.opts.Write(ctx, e.rec)
		if err == nil {
			q.mu.Lock()
			q.removeLocked(e)
			q.stats.Written++
			q.mu.Unlock()
			q.setAway(nil)
			if q.opts.OnWritten != nil {
				q.opts.OnWritten(e.rec)
			}
			pause, attempts = q.opts.RetryMin, 0
			continue
		}
		if ctx.Err() != nil {
			return // closing: the record stays for the file
		}
		if q.opts.Unavailable(err) {
			q.setAway(err)
			attempts = 0
		} else if attempts++; attempts >= MaxAttempts {
			q.mu.Lock()
			if e.seq == q.headSeq {
				q.dropLocked(e.rec, DropRefused, err)
				q.removeLocked(e)
			}
			q.mu.Unlock()
			pause, attempts = q.opts.RetryMin, 0
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
			pause = q.opts.RetryMin
		case <-time.After(pause):
			pause = min(2*pause, q.opts.RetryMax)
		}
	}
}

// setAway records whether the destination answers, telling OnAway and
// OnBack of each change.
func (q *Queue) setAway(err error) {
	q.mu.Lock()
	was := q.stats.Away
	q.stats.Away = err != nil
	if was != q.stats.Away {
		q.changedLocked()
	}
	q.mu.Unlock()
	switch {
	case err != nil && q.opts.OnAway != nil:
		q.opts.OnAway(err)
	case err == nil && was && q.opts.OnBack != nil:
		q.opts.OnBack()
	}
}

// ErrNotKept is returned (wrapped) by Close when records were lost.
var ErrNotKept = errors.New("records not kept")

// Close stops taking records, waits until ctx ends for the writer to
// write what waits — not at all while the destination is away — and
// moves what is still in memory to the file, for the next process to
// write. It returns an error when records could not be kept that way
// (no file, or the file full); OnDrop has been told of each.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		started := q.stop != nil
		q.mu.Unlock()
		if started {
			<-q.done
		}
		return nil
	}
	q.closed = true
	q.changedLocked()
	started := q.stop != nil
	q.mu.Unlock()
	for started {
		q.mu.Lock()
		idle := q.pendingLocked() == 0 || q.stats.Away
		ch := q.changed
		q.mu.Unlock()
		if idle {
			break
		}
		select {
		case <-ch:
			continue
		case <-ctx.Done():
		}
		break
	}
	if started {
		q.stop()
		<-q.done
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	// Oldest first, as far as the file's bound lets: the newest are the
	// ones lost.
	for q.file != nil && q.memHead < len(q.mem) && q.file.used()+frameSize(len(q.mem[q.memHead].rec)) <= q.opts.MaxDisk {
		if q.moveHeadToFileLocked() != nil {
			break
		}
	}
	lost := len(q.mem) - q.memHead
	for q.memHead < len(q.mem) {
		q.dropLocked(q.mem[q.memHead].rec, DropClosed, nil)
		q.popMemLocked()
	}
	var err error
	if q.file != nil {
		err = errors.Join(q.file.sync(), q.file.close())
	}
	if lost > 0 {
		return errors.Join(fmt.Errorf("spool: %d %w", lost, ErrNotKept), err)
	}
	return err
}
