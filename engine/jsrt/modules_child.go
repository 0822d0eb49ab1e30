package jsrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/procgroup"
	"github.com/uncaged/workflow/engine/threadenv"
)

// spawnError is Node's error for a child that could not start:
// "spawn <file> ENOENT" with code, errno, syscall, path and spawnargs.
func (e *jsEnv) spawnError(file string, args []string, err error) *goja.Object {
	code, errno := "UNKNOWN", 0
	var en syscall.Errno
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		code, errno = "ENOENT", int(syscall.ENOENT)
	case errors.Is(err, fs.ErrPermission):
		code, errno = "EACCES", int(syscall.EACCES)
	case errors.As(err, &en):
		code, errno = errnoCodes[en], int(en)
	}
	spawnargs := make([]any, len(args))
	for i, a := range args {
		spawnargs[i] = a
	}
	return e.newError("Error", fmt.Sprintf("spawn %s %s", file, code),
		"code", code, "errno", -errno, "syscall", "spawn "+file, "path", file, "spawnargs", e.vm.NewArray(spawnargs...))
}

type spawnOptions struct {
	file, cwd string
	args, env []string
	stdio     [3]string
	// path is file as found on the thread's PATH, lookErr why it was not
	// ("" and nil: exec resolves file itself, on the host's PATH).
	path    string
	lookErr error
}

func (e *jsEnv) spawnOptions(call goja.FunctionCall) spawnOptions {
	o := spawnOptions{file: call.Argument(0).String()}
	if arr, ok := call.Argument(1).(*goja.Object); ok {
		e.vm.ForOf(arr, func(v goja.Value) bool {
			o.args = append(o.args, v.String())
			return true
		})
	}
	opts := call.Argument(2).ToObject(e.vm)
	if v := opts.Get("cwd"); v != nil && !goja.IsNull(v) && !goja.IsUndefined(v) {
		o.cwd = v.String()
	}
	if v, ok := opts.Get("env").(*goja.Object); ok {
		o.env = []string{}
		e.vm.ForOf(v, func(kv goja.Value) bool {
			o.env = append(o.env, kv.String())
			return true
		})
	}
	// Without options a child gets the thread's environment and directory,
	// as a Node child gets its parent's; the host process's own are those
	// of whichever command started the host.
	if th := threadenv.Of(e.host); th != nil {
		if o.env == nil {
			o.env = th.Environ()
		}
		o.cwd = th.Abs(o.cwd)
		if o.cwd == "" {
			o.cwd = th.Dir()
		}
		lookup := th
		if o.env != nil {
			// A child given its own env is looked up on that env's PATH.
			lookup = threadenv.New(o.env, o.cwd, "")
		}
		o.path, o.lookErr = lookup.LookPath(o.file)
	}
	o.stdio = [3]string{"pipe", "pipe", "pipe"}
	if v, ok := opts.Get("stdio").(*goja.Object); ok {
		for i := range 3 {
			if s := v.Get(fmt.Sprint(i)); s != nil && !goja.IsUndefined(s) {
				o.stdio[i] = s.String()
			}
		}
	}
	return o
}

// command builds the child's exec.Cmd; with a context, cancelling it
// stops the child (see spawnSync). The child leads its own process group,
// so the run can kill it and everything it started in one signal, and it
// dies with the engine host like an agent's program (package procgroup).
func (o spawnOptions) command(ctx context.Context) (*exec.Cmd, *procgroup.Group) {
	cmd := exec.CommandContext(ctx, o.file, o.args...)
	if o.path != "" || o.lookErr != nil {
		cmd.Path, cmd.Err = o.path, o.lookErr
	}
	cmd.Dir = o.cwd
	if o.env != nil {
		cmd.Env = o.env
	}
	return cmd, procgroup.New(cmd, procgroup.Owner{})
}

// childProcessHost backs child_process.js.
func (e *jsEnv) childProcessHost() *goja.Object {
	return e.obj(
		"spawn", e.spawn,
		"spawnSync", e.spawnSync,
		"write", func(call goja.FunctionCall) goja.Value {
			if p := e.procs.get(call.Argument(0).ToInteger()); p != nil && p.stdin != nil {
				if b, ok := copyBytes(call.Argument(1)); ok {
					p.stdin.write(b)
				}
			}
			return goja.Undefined()
		},
		"end", func(call goja.FunctionCall) goja.Value {
			if p := e.procs.get(call.Argument(0).ToInteger()); p != nil && p.stdin != nil {
				p.stdin.end()
			}
			return goja.Undefined()
		},
		"kill", func(call goja.FunctionCall) goja.Value {
			id := call.Argument(0).ToInteger()
			sig, ok := signalOf(call.Argument(1))
			if !ok {
				e.throwTypeError(fmt.Sprintf("Unknown signal: %s", call.Argument(1).String()), "code", "ERR_UNKNOWN_SIGNAL")
			}
			e.procs.mu.Lock()
			defer e.procs.mu.Unlock()
			p := e.procs.procs[id]
			if p == nil || !p.running || p.cmd.Process == nil {
				return e.vm.ToValue(false)
			}
			return e.vm.ToValue(p.cmd.Process.Signal(sig) == nil)
		},
	)
}

// spawn starts a child and reports its life through onEvent(kind, a, b)
// on the loop: spawn, stdout/stderr chunks, stdout-end/stderr-end, exit
// (code, signal), or error. It returns {id, pid}.
func (e *jsEnv) spawn(call goja.FunctionCall) goja.Value {
	if e.validating {
		e.throwError("child processes are not available while a bundle is validated; start them inside run")
	}
	o := e.spawnOptions(call)
	onEvent, ok := goja.AssertFunction(call.Argument(3))
	if !ok {
		e.throwTypeError("spawn callback must be a function")
	}
	l := e.loop
	id := e.nextID()
	emit := func(kind string, args ...goja.Value) func() error {
		return func() error {
			return l.call(onEvent, goja.Undefined(), append([]goja.Value{e.vm.ToValue(kind)}, args...)...)
		}
	}

	// Not tied to a context: the run's kill reaches the whole process group
	// through procTable.killAll, which exec.CommandContext would not.
	cmd, group := o.command(context.Background())
	p := &proc{cmd: cmd, group: group}
	var childEnds []*os.File
	closeChildEnds := func() {
		for _, f := range childEnds {
			_ = f.Close()
		}
	}
	var stdinW *os.File
	type output struct {
		name string
		r    *os.File
	}
	var outputs []output
	for i, mode := range o.stdio {
		switch {
		case i == 0 && mode == "pipe":
			r, w, err := os.Pipe()
			if err != nil {
				e.throwError(err.Error())
			}
			cmd.Stdin, stdinW = r, w
			childEnds = append(childEnds, r)
		case i > 0 && mode == "pipe":
			r, w, err := os.Pipe()
			if err != nil {
				e.throwError(err.Error())
			}
			if i == 1 {
				cmd.Stdout = w
				outputs = append(outputs, output{"stdout", r})
			} else {
				cmd.Stderr = w
				outputs = append(outputs, output{"stderr", r})
			}
			childEnds = append(childEnds, w)
			p.readers = append(p.readers, r)
		case i == 1 && mode == "inherit":
			cmd.Stdout = os.Stdout
		case i == 2 && mode == "inherit":
			cmd.Stderr = os.Stderr
		}
	}

	if err := group.Start(); err != nil {
		closeChildEnds()
		for _, out := range outputs {
			_ = out.r.Close()
		}
		if stdinW != nil {
			_ = stdinW.Close()
		}
		// Node reports a failed spawn asynchronously, as an 'error' event.
		release := l.hold()
		errObj := e.spawnError(o.file, append([]string{o.file}, o.args...), err)
		l.post(func() error {
			release()
			return emit("error", errObj)()
		})
		return e.obj("id", id, "pid", 0)
	}
	closeChildEnds()
	p.running = true
	if stdinW != nil {
		p.stdin = newStdinPipe(stdinW)
		go p.stdin.run()
	}
	e.procs.add(id, p)
	if l.killed.Load() {
		_ = group.Signal(syscall.SIGKILL) // the run died while this child started
	}

	// The loop stays alive until the exit and every output's end are
	// delivered; then the 'close' event has fired.
	pending := 1 + len(outputs)
	release := l.hold()
	delivered := func() {
		pending--
		if pending == 0 {
			release()
			e.procs.remove(id)
		}
	}
	l.post(emit("spawn"))
	for _, out := range outputs {
		out := out
		l.workers.Add(1)
		go func() {
			defer l.workers.Done()
			// A chunk waits in the loop's queue until JavaScript takes it;
			// with JavaScript busy, a child writing without pause would
			// fill the host's memory there. At most outputInFlight chunks
			// per stream wait; the child then waits on its pipe, as a
			// Node child waits on a paused stream.
			inFlight := make(chan struct{}, outputInFlight)
			buf := make([]byte, outputChunk)
			for {
				n, err := out.r.Read(buf)
				if n > 0 {
					select {
					case inFlight <- struct{}{}:
					case <-l.ctx.Done():
						n, err = 0, l.ctx.Err()
					}
				}
				if n > 0 {
					chunk := append([]byte(nil), buf[:n]...)
					l.post(func() error {
						<-inFlight
						return emit(out.name, e.vm.ToValue(e.vm.NewArrayBuffer(chunk)))()
					})
				}
				if err != nil {
					break
				}
			}
			_ = out.r.Close()
			l.post(func() error {
				delivered()
				return emit(out.name + "-end")()
			})
		}()
	}
	l.workers.Add(1)
	go func() {
		defer l.workers.Done()
		// Like a Node child, it may leave processes running in its group
		// when it exits; the run's end does not reach them either.
		err := group.Wait(false)
		e.procs.exited(id)
		if p.stdin != nil {
			p.stdin.abort()
		}
		code, signal := waitResult(err)
		l.post(func() error {
			delivered()
			return emit("exit", e.jsCode(code), e.jsSignal(signal))()
		})
	}()
	return e.obj("id", id, "pid", cmd.Process.Pid)
}

// A child's output reaches JavaScript in chunks of at most outputChunk
// bytes, of which at most outputInFlight per stream wait for it.
const (
	outputChunk    = 32 << 10
	outputInFlight = 8
)

// waitResult turns Wait's error into an exit code (-1 when killed by a
// signal) and a signal name ("" when it exited).
func waitResult(err error) (code int, signal string) {
	if err == nil {
		return 0, ""
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, signalName(ws.Signal())
		}
		return ee.ExitCode(), ""
	}
	return -1, ""
}

func (e *jsEnv) jsCode(code int) goja.Value {
	if code < 0 {
		return goja.Null()
	}
	return e.vm.ToValue(code)
}

func (e *jsEnv) jsSignal(sig string) goja.Value {
	if sig == "" {
		return goja.Null()
	}
	return e.vm.ToValue(sig)
}

// spawnSync runs a child to completion while JavaScript waits (execSync
// and friends). The run's kill still reaches it: the context kills the
// process group, and JavaScript is interrupted as soon as it resumes.
func (e *jsEnv) spawnSync(call goja.FunctionCall) goja.Value {
	if e.validating {
		e.throwError("child processes are not available while a bundle is validated; start them inside run")
	}
	o := e.spawnOptions(call)
	opts := call.Argument(2).ToObject(e.vm)
	input, _ := copyBytes(opts.Get("input"))
	timeout := time.Duration(opts.Get("timeout").ToFloat() * float64(time.Millisecond))
	killSig, ok := signalOf(opts.Get("killSignal"))
	if !ok {
		killSig = syscall.SIGTERM
	}
	maxBuffer := opts.Get("maxBuffer").ToInteger()

	ctx, cancel := context.WithCancel(e.loop.ctx)
	defer cancel()
	var timedOut atomic.Bool
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
		defer t.Stop()
	}
	cmd, group := o.command(ctx)
	runCtx := e.loop.ctx
	cmd.Cancel = func() error {
		if runCtx.Err() != nil {
			_ = group.Signal(syscall.SIGKILL)
			return nil
		}
		return cmd.Process.Signal(killSig)
	}
	cmd.WaitDelay = 2 * time.Second
	// Node kills a child whose output passes maxBuffer; one whose output
	// would not fit in the run's memory budget is killed too.
	limit := int64(-1)
	if maxBuffer > 0 {
		limit = maxBuffer
	}
	stopChild := func() { _ = group.Signal(syscall.SIGKILL) }
	stdout := &boundedOutput{acct: e.loop.acct, limit: limit, stop: stopChild}
	stderr := &boundedOutput{acct: e.loop.acct, limit: limit, stop: stopChild}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
	err := group.Start()
	if err == nil {
		err = group.Wait(false)
	}
	res := e.obj("pid", 0, "stdout", e.vm.NewArrayBuffer(stdout.Bytes()), "stderr", e.vm.NewArrayBuffer(stderr.Bytes()))
	if cmd.Process != nil {
		_ = res.Set("pid", cmd.Process.Pid)
	}
	if cmd.ProcessState == nil {
		_ = res.Set("status", goja.Null())
		_ = res.Set("signal", goja.Null())
		_ = res.Set("error", e.spawnError(o.file, append([]string{o.file}, o.args...), err))
		return res
	}
	code, signal := waitResult(err)
	_ = res.Set("status", e.jsCode(code))
	_ = res.Set("signal", e.jsSignal(signal))
	switch {
	case stdout.refused != nil:
		_ = res.Set("error", e.refusal(stdout.refused))
	case stderr.refused != nil:
		_ = res.Set("error", e.refusal(stderr.refused))
	case timedOut.Load():
		_ = res.Set("error", e.newError("Error", fmt.Sprintf("spawnSync %s ETIMEDOUT", o.file), "code", "ETIMEDOUT", "syscall", "spawnSync "+o.file, "path", o.file))
	case stdout.over || stderr.over:
		_ = res.Set("error", e.newError("Error", fmt.Sprintf("spawnSync %s ENOBUFS", o.file), "code", "ENOBUFS", "syscall", "spawnSync "+o.file, "path", o.file))
	}
	return res
}

// signalOf reads a signal given as a name ("SIGTERM") or a number;
// undefined means SIGTERM.
func signalOf(v goja.Value) (syscall.Signal, bool) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return syscall.SIGTERM, true
	}
	if goja.IsNumber(v) {
		return syscall.Signal(v.ToInteger()), true
	}
	return signalNum(v.String())
}
