package jsrt

import (
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/uncaged/workflow/engine/procgroup"
)

// procTable tracks a run's child processes so that killing the run kills
// them, from whatever goroutine the kill comes.
type procTable struct {
	mu    sync.Mutex
	procs map[int64]*proc
}

type proc struct {
	cmd     *exec.Cmd
	group   *procgroup.Group
	running bool       // until Wait returns; guarded by procTable.mu
	stdin   *stdinPipe // nil unless stdin is piped
	readers []*os.File // our ends of stdout/stderr pipes
}

func newProcTable() *procTable { return &procTable{procs: map[int64]*proc{}} }

func (t *procTable) add(id int64, p *proc) {
	t.mu.Lock()
	t.procs[id] = p
	t.mu.Unlock()
}

func (t *procTable) get(id int64) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs[id]
}

// exited marks p as reaped: its process group may be gone and its id
// reused, so it must not be signalled any more.
func (t *procTable) exited(id int64) {
	t.mu.Lock()
	if p := t.procs[id]; p != nil {
		p.running = false
	}
	t.mu.Unlock()
}

func (t *procTable) remove(id int64) {
	t.mu.Lock()
	delete(t.procs, id)
	t.mu.Unlock()
}

// killAll kills the process group of every running child. Safe from any
// goroutine.
func (t *procTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.running {
			_ = p.group.Signal(syscall.SIGKILL)
		}
		if p.stdin != nil {
			p.stdin.abort()
		}
	}
}

// closePipes closes our ends of the output pipes, so that readers stop
// even when a grandchild that escaped the process group still holds the
// other end.
func (t *procTable) closePipes() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		for _, r := range p.readers {
			_ = r.Close()
		}
	}
}

// stdinPipe feeds a child's stdin from the loop without blocking it: a
// goroutine writes queued chunks in order.
type stdinPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	bufs   [][]byte
	closed bool
	w      *os.File
}

func newStdinPipe(w *os.File) *stdinPipe {
	s := &stdinPipe{w: w}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *stdinPipe) run() {
	broken := false
	for {
		s.mu.Lock()
		for len(s.bufs) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.bufs) == 0 {
			s.mu.Unlock()
			_ = s.w.Close()
			return
		}
		b := s.bufs[0]
		s.bufs = s.bufs[1:]
		s.mu.Unlock()
		if !broken {
			if _, err := s.w.Write(b); err != nil {
				broken = true // the child stopped reading; drop the rest
			}
		}
	}
}

func (s *stdinPipe) write(b []byte) {
	s.mu.Lock()
	if !s.closed {
		s.bufs = append(s.bufs, b)
		s.cond.Signal()
	}
	s.mu.Unlock()
}

func (s *stdinPipe) end() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// abort ends the pipe and unblocks a write in progress.
func (s *stdinPipe) abort() {
	s.mu.Lock()
	s.closed = true
	s.bufs = nil
	s.cond.Broadcast()
	s.mu.Unlock()
	_ = s.w.Close()
}
