package jsrt

import (
	"math"
	"time"

	"github.com/dop251/goja"
)

// timer is a setTimeout/setInterval/setImmediate registration. Everything
// but the time.Timer's own callback is loop-only.
type timer struct {
	l        *loop
	id       int64
	fn       goja.Callable
	args     []goja.Value
	interval time.Duration
	repeat   bool
	t        *time.Timer
	ref      bool
	done     bool
	gen      int // bumped on every (re)schedule; stale firings are ignored
}

// maxTimerDelay is Node's: larger delays (and NaN, negatives) become 1 ms.
const maxTimerDelay = math.MaxInt32

func timerDelay(v goja.Value) time.Duration {
	ms := 0.0
	if v != nil && !goja.IsUndefined(v) {
		ms = v.ToFloat()
	}
	if math.IsNaN(ms) || ms < 1 || ms > maxTimerDelay {
		ms = 1
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// startTimer schedules fn. immediate timers run on the next loop turn.
func (l *loop) startTimer(fn goja.Callable, args []goja.Value, d time.Duration, repeat, immediate bool) int64 {
	l.nextTimerID++
	t := &timer{l: l, id: l.nextTimerID, fn: fn, args: args, interval: d, repeat: repeat, ref: true}
	l.timers[t.id] = t
	l.refs++
	if immediate {
		l.post(func() error { return t.fire(0) })
	} else {
		t.schedule()
	}
	return t.id
}

func (t *timer) schedule() {
	t.gen++
	g := t.gen
	t.t = time.AfterFunc(t.interval, func() { t.l.post(func() error { return t.fire(g) }) })
}

func (t *timer) fire(gen int) error {
	if t.done || gen != t.gen {
		return nil
	}
	if t.repeat {
		// Like Node, the next run is scheduled from now, after this one.
		defer func() {
			if !t.done {
				t.schedule()
			}
		}()
	} else {
		t.finish()
	}
	return t.l.call(t.fn, goja.Undefined(), t.args...)
}

// finish retires the timer: it will not fire again and no longer keeps
// the loop alive.
func (t *timer) finish() {
	if t.done {
		return
	}
	t.done = true
	t.stop()
	if t.ref {
		t.l.refs--
	}
	delete(t.l.timers, t.id)
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
}

func (l *loop) clearTimer(id int64) {
	if t, ok := l.timers[id]; ok {
		t.finish()
	}
}

// setTimerRef implements Timeout.ref()/unref(): an unref'd timer still
// fires but does not keep a step waiting for it.
func (l *loop) setTimerRef(id int64, ref bool) {
	t, ok := l.timers[id]
	if !ok || t.ref == ref {
		return
	}
	t.ref = ref
	if ref {
		l.refs++
	} else {
		l.refs--
	}
}

// refreshTimer implements Timeout.refresh(): restart the countdown.
func (l *loop) refreshTimer(id int64) {
	t, ok := l.timers[id]
	if !ok || t.t == nil {
		return
	}
	t.t.Stop()
	t.schedule()
}

// stopTimers cancels every timer; used when the run dies.
func (l *loop) stopTimers() {
	for _, t := range l.timers {
		t.stop()
		t.done = true
	}
	l.timers = map[int64]*timer{}
}
