package threads

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"unicode/utf8"

	"github.com/uncaged/workflow/engine/atomicfile"
)

// Group commit. Every step of every thread names its new head in its
// bundle's threads.json, and that file is rewritten whole: written to a
// temporary file, fsynced, renamed, and its directory fsynced. Done once
// per step, K threads of one workflow would pay K rewrites and 2K fsyncs in
// turn, under one lock, for the work of one: steps would not get faster
// with threads. So the changes of concurrent callers in this process are
// gathered, and one rewrite carries every change waiting for it.
//
// The rule that keeps each caller's promise: a caller returns only when a
// rewrite holding its change is renamed into place and a directory fsync
// begun after that rename has returned, and a change with a ready
// function is written only once that function has returned nil (the
// node the change names is on disk) and, when it names a directory to
// sync (the CAS directory, holding the node's name), an fsync of that
// directory begun after ready returned has succeeded — one for the whole
// group. A change whose ready or sync fails is left out and its caller
// alone gets the error; the others are committed.
//
// One caller at a time leads: it takes the changes waiting, commits them
// under the file lock, and hands the lead to a caller that arrived
// meanwhile and can be written (or, if none can yet, to the first whose
// ready returns). A caller that arrives while a group is being committed
// runs its own ready as it waits, and its change joins the first group that
// forms after ready returned: so a group never waits for nodes still
// being stored, which would hold up every change in it, and nodes are
// stored side by side while groups are written one after another. A
// caller that finds no group in flight leads at once, and its ready runs
// while its index is written and synced, as a thread alone saw it before
// changes were grouped. The directory fsync of a group is made after the
// lead and the lock are let go, shared with the groups that follow
// (atomicfile.SyncDirShared).
//
// Other processes, and Modify, are writers of their own: the file lock
// orders them with the groups, and each group reads the file afresh
// under it, so no update is lost between them.

// change is one caller's update waiting to be committed.
type change struct {
	id     string
	entry  Entry
	remove bool
	// ready, when set, must return nil before the index naming entry may
	// be renamed into place; it is nil once it has been called.
	ready func() error
	// syncDir, when set, is a directory an fsync of which, begun after
	// ready returned, must precede the rename (the CAS directory, holding
	// the name of the node entry names); one serves the whole group.
	syncDir string
	// readying is set while the caller runs ready itself, waiting for a
	// group to take its change (guarded by committer.mu).
	readying bool
	// lead is sent true when this caller is to commit the next group,
	// false when its change was committed (or failed: err).
	lead chan bool
	err  error
	// found: for a remove, whether id was there.
	found bool
	// The entry before apply, to take the change back out.
	prev    Entry
	existed bool
}

// committer serialises the writes of one threads.json made in this
// process and groups them.
type committer struct {
	mu      sync.Mutex
	pending []*change
	leading bool
	// What this process last wrote, with its image: when the file under
	// the lock still holds exactly these bytes, the image is used instead
	// of parsing every entry again (an index of 10,000 threads is over a
	// megabyte). Guarded by the file lock, held by the leader.
	wrote []byte
	image *indexImage
}

// committers holds one committer per index path.
var committers sync.Map // string → *committer

func committerFor(path string) *committer {
	if c, ok := committers.Load(path); ok {
		return c.(*committer)
	}
	c, _ := committers.LoadOrStore(path, &committer{})
	return c.(*committer)
}

// maxExactInt is the largest integer every JSON reader keeps exactly: the
// original is JavaScript, and this package reads numbers as float64.
const maxExactInt = 1<<53 - 1

// checkEntry refuses an entry that the index's readers would not read
// back as the same entry: a head or start that is not a node hash, a time
// outside what a JSON number holds exactly, an id that is not UTF-8 text.
// Written, such an entry would make the whole index damaged.
func checkEntry(id string, e Entry) error {
	switch {
	case id == "":
		return errors.New("threads: empty thread id")
	case !utf8.ValidString(id):
		return fmt.Errorf("threads: thread id %q is not UTF-8 text", id)
	}
	if bad := badHashes(e.Head, e.Start); bad != "" {
		return fmt.Errorf("threads: thread %q: %s", clip(id), bad)
	}
	if e.UpdatedAt > maxExactInt || e.UpdatedAt < -maxExactInt {
		return fmt.Errorf("threads: thread %q: updatedAt %d is beyond what a JSON number holds exactly", clip(id), e.UpdatedAt)
	}
	return nil
}

// commit puts ch into the next group of bundleDir's index and returns once
// that group is durably committed, or ch failed.
func commit(bundleDir string, ch *change) error {
	path := filepath.Clean(IndexFile(bundleDir))
	c := committerFor(path)
	ch.lead = make(chan bool, 1)
	c.mu.Lock()
	c.pending = append(c.pending, ch)
	if !c.leading {
		c.leading = true
		c.mu.Unlock()
		c.lead(bundleDir, path, ch)
		return ch.err
	}
	ready := ch.ready
	ch.readying = ready != nil
	c.mu.Unlock()
	if ready != nil {
		err := ready()
		c.mu.Lock()
		ch.ready, ch.readying, ch.err = nil, false, err
		if !c.leading {
			// The last group was let go with none of the waiting changes
			// ready: the first to be ready leads.
			c.leading = true
			c.mu.Unlock()
			c.lead(bundleDir, path, ch)
			return ch.err
		}
		c.mu.Unlock()
	}
	if <-ch.lead {
		c.lead(bundleDir, path, ch)
	}
	return ch.err
}

// lead commits one group, as the caller of self: the changes waiting
// once the file lock is held (so that the longer another writer holds
// it, the more changes one rewrite carries) whose ready has returned, or
// that have none; self's among them.
func (c *committer) lead(bundleDir, path string, self *change) {
	var group, failed []*change
	renamed, taken := false, false
	err := atomicfile.Update(path, func() error {
		group, failed = c.take()
		taken = true
		var err error
		renamed, err = c.write(bundleDir, path, group)
		return err
	})
	if !taken {
		// The lock could not be had: the changes that could have been
		// written fail with that.
		group, failed = c.take()
	}
	if err != nil {
		for _, ch := range group {
			if ch.err == nil {
				ch.err = err
			}
		}
	}
	c.mu.Lock()
	if next := c.nextLeader(); next != nil {
		next.lead <- true
	} else {
		c.leading = false
	}
	c.mu.Unlock()
	if renamed {
		// Outside the lead and the lock: the next group renames its file
		// meanwhile, and one directory fsync may serve both.
		if err := atomicfile.SyncDirShared(filepath.Dir(path)); err != nil {
			for _, ch := range group {
				if ch.err == nil {
					ch.err = err
				}
			}
		}
	}
	for _, ch := range append(group, failed...) {
		if ch != self {
			ch.lead <- false
		}
	}
}

// take removes from the waiting changes those a group can hold now, and
// those whose ready failed; the changes whose ready still runs wait on.
func (c *committer) take() (group, failed []*change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var later []*change
	for _, ch := range c.pending {
		switch {
		case ch.readying:
			later = append(later, ch)
		case ch.err != nil:
			failed = append(failed, ch)
		default:
			group = append(group, ch)
		}
	}
	c.pending = later
	return group, failed
}

// nextLeader picks who commits the next group: the first waiting change
// that can be written now; nil when there is none (a change whose ready
// still runs then leads once its ready returns, whichever is first).
// Called with mu held.
func (c *committer) nextLeader() *change {
	for _, ch := range c.pending {
		if !ch.readying {
			return ch
		}
	}
	return nil
}

// errNotReady stops a rewrite that holds a change whose node is not
// stored; the change is taken out and the rest written again.
var errNotReady = errors.New("a node the index would name is not stored")

// write commits group, with the file lock held, setting the err of each
// change whose ready fails; it reports whether it renamed a new index
// into place (whose directory is then still to be synced), and an error
// that fails every change of the group.
func (c *committer) write(bundleDir, path string, group []*change) (renamed bool, err error) {
	if len(group) == 0 {
		return false, nil
	}
	m, was, err := c.current(bundleDir, path)
	if err != nil {
		return false, err
	}
	// From here the image is what the file will hold only if the write
	// succeeds: until it has, it is not to be trusted.
	c.wrote, c.image = nil, nil
	if !apply(m, group) {
		c.wrote, c.image = was, m
		return false, nil
	}
	b := m.bytes()
	// What must precede the rename runs while the new index is written
	// and synced: the readies not run yet (a leader's own), then the
	// directory fsyncs the group's entries wait for.
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		prepare(group)
	}()
	err = atomicfile.ReplaceWhen(path, b, 0o644, func() error {
		<-prepared
		for _, ch := range group {
			if ch.err != nil {
				return errNotReady
			}
		}
		return nil
	})
	// A write that failed before it waited: the readies have still been
	// called, or are being called, and must be done with before the
	// callers hear of it.
	<-prepared
	if errors.Is(err, errNotReady) {
		// Rare: a node could not be stored. Every other ready has
		// returned nil, so the rewrite without the failed changes may
		// be renamed at once.
		revert(m, group)
		if !apply(m, group) {
			c.wrote, c.image = was, m
			return false, nil
		}
		b = m.bytes()
		err = atomicfile.Replace(path, b, 0o644)
	}
	if err != nil {
		return false, err
	}
	c.wrote, c.image = b, m
	return true, nil
}

// prepare calls the readies of group not called yet, then syncs the
// directories its entries wait for, once each, setting the err of the
// changes that fail.
func prepare(group []*change) {
	for _, ch := range group {
		if ch.ready != nil {
			ch.err, ch.ready = ch.ready(), nil
		}
	}
	synced := map[string]error{}
	for _, ch := range group {
		if ch.err != nil || ch.syncDir == "" {
			continue
		}
		err, done := synced[ch.syncDir]
		if !done {
			err = atomicfile.SyncDirShared(ch.syncDir)
			synced[ch.syncDir] = err
		}
		ch.err = err
	}
}

// current reads the index under the lock, with the file's bytes (nil for
// none), reusing the image of what this process last wrote when the file
// still holds it byte for byte.
func (c *committer) current(bundleDir, path string) (*indexImage, []byte, error) {
	b, missing, problem := readIndexFile(path)
	if !missing && problem == "" && c.wrote != nil && bytes.Equal(b, c.wrote) {
		return c.image, b, nil
	}
	c.wrote, c.image = nil, nil
	if missing || problem != "" {
		// What ReadIndex makes of a missing file or one it cannot read
		// (an empty index, or damage naming the bundle directory).
		idx, err := ReadIndex(bundleDir)
		if err != nil {
			return nil, nil, err
		}
		return newImage(idx), nil, nil
	}
	idx, fl := parseIndex(b)
	if fl != nil {
		return nil, nil, fl.at(path, b)
	}
	return newImage(idx), b, nil
}

// apply makes the changes of group that have not failed, in order,
// remembering what each replaced, and reports whether any changed the
// index.
func apply(m *indexImage, group []*change) bool {
	changed := false
	for _, ch := range group {
		if ch.err != nil {
			continue
		}
		ch.prev, ch.existed = m.entries[ch.id]
		if ch.remove {
			ch.found = ch.existed
			if ch.existed {
				m.remove(ch.id)
				changed = true
			}
			continue
		}
		m.set(ch.id, ch.entry)
		changed = true
	}
	return changed
}

// revert takes back what apply made of group, newest first, so that the
// image is as it was read; failed changes, made before they failed,
// included.
func revert(m *indexImage, group []*change) {
	for i := len(group) - 1; i >= 0; i-- {
		ch := group[i]
		if ch.existed {
			m.set(ch.id, ch.prev)
		} else {
			m.remove(ch.id)
		}
	}
}
