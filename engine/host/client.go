package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/uncaged/workflow/engine/storage"
)

// ErrNoHost is returned by Dial when no host serves the root.
var ErrNoHost = errors.New("no engine host is running for this storage root")

// ErrRefused is returned when the root's engine socket is not this
// user's to use: the host serving it refused this user (the socket is
// open to the user the host runs as only), or the client refused a socket
// or a process that is not this user's own, before sending anything
// (dialOwnHost).
var ErrRefused = errors.New("the engine host refused this connection")

// Client talks to the host of one storage root.
type Client struct {
	http *http.Client
	// caller, when set, is asked for the Caller of each run, fork and
	// resume that names none (SetCaller).
	caller func() *Caller
}

// SetCaller makes every run, fork and resume sent through c that names no
// Caller carry caller(), asked at each request. Call it before using c.
func (c *Client) SetCaller(caller func() *Caller) { c.caller = caller }

func (c *Client) callerOr(given *Caller) *Caller {
	if given != nil || c.caller == nil {
		return given
	}
	return c.caller()
}

// Dial connects to the host serving l, if any. Every connection the
// client makes, the first included, is to the user's own host or none
// (dialOwnHost).
func Dial(l storage.Layout) (*Client, error) {
	sock := SocketPath(l)
	c := &Client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialOwnHost(ctx, l, sock)
		},
	}}}
	if _, err := c.Status(); err != nil {
		c.Close()
		var refused *refusedSocket
		switch {
		case errors.As(err, &refused):
			return nil, refused // without the request's URL: no request was made
		case errors.Is(err, ErrRefused):
			return nil, err
		case errors.Is(err, syscall.EACCES):
			return nil, fmt.Errorf("%w: the socket %s is not open to uid %d (only the user the host runs as may use it)", ErrRefused, sock, os.Geteuid())
		case errors.Is(err, ErrNoHost):
			var ue *url.Error
			if errors.As(err, &ue) {
				return nil, ue.Err // what dialOwnHost found, without the request it stopped
			}
			return nil, err
		}
		return nil, fmt.Errorf("%w (%v)", ErrNoHost, err)
	}
	return c, nil
}

// Close releases the client's idle connections. A long-running process
// that dials often (the connector's API) must close the clients it drops.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Ensure returns a client for the root's host, starting one with spawn when
// none runs and waiting (up to 10 s) for it to answer.
func Ensure(l storage.Layout, spawn func() error) (*Client, error) {
	if c, err := Dial(l); err == nil {
		return c, nil
	} else if errors.Is(err, ErrRefused) {
		return nil, err // a host runs; waiting will not make it ours
	}
	if !Running(l) {
		if err := spawn(); err != nil {
			return nil, fmt.Errorf("start engine host: %w", err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Dial(l)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("engine host did not start within 10s (see %s): %w", LogFile(l), err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Status asks the host about itself.
func (c *Client) Status() (Status, error) {
	var s Status
	return s, c.do(http.MethodGet, "/v1/status", nil, &s)
}

// List returns the threads the host runs.
func (c *Client) List() ([]RunningThread, error) {
	var out []RunningThread
	return out, c.do(http.MethodGet, "/v1/threads", nil, &out)
}

// Running is List by thread id: what a Sighting asks.
func (c *Client) Running() (map[string]RunningThread, error) {
	list, err := c.List()
	return ByThread(list), err
}

// Run starts a thread and returns its id (RunOnce, for a caller that
// need not know whether a key had started it already).
func (c *Client) Run(req RunRequest) (string, error) {
	out, err := c.RunOnce(req)
	return out.ThreadID, err
}

// RunOnce is Run that also says whether the request's idempotency key
// had already started the thread (RunOutcome.Replayed). Its key errors
// match ErrInvalidIdempotencyKey, ErrIdempotencyKeyReused and
// ErrIdempotencyKeyUnsettled.
func (c *Client) RunOnce(req RunRequest) (RunOutcome, error) {
	req.Caller = c.callerOr(req.Caller)
	const path = "/v1/threads"
	status, b, err := c.call(http.MethodPost, path, req)
	if err != nil {
		return RunOutcome{}, err
	}
	if status >= 300 {
		return RunOutcome{}, failedAnswer(http.MethodPost, path, status, b)
	}
	var ref ThreadRef
	if err := json.Unmarshal(b, &ref); err != nil {
		return RunOutcome{}, err
	}
	return RunOutcome{ThreadID: ref.ThreadID, Replayed: status == http.StatusOK}, nil
}

// Fork forks a thread and returns the new id.
func (c *Client) Fork(id string, req ForkRequest) (string, error) {
	req.Caller = c.callerOr(req.Caller)
	var ref ThreadRef
	return ref.ThreadID, c.do(http.MethodPost, "/v1/threads/"+id+"/fork", req, &ref)
}

// Kill ends a thread with return code 130; its summary names the
// client's caller (SetCaller) as who killed it. A host older than
// KillRequest ignores the body.
func (c *Client) Kill(id string) error {
	var req KillRequest
	if caller := c.callerOr(nil); caller != nil {
		req.By = caller.Requester
	}
	return c.do(http.MethodPost, "/v1/threads/"+id+"/kill", req, nil)
}

// Pause holds a running thread once its current step is written; until
// then the thread is pausing.
func (c *Client) Pause(id string) error {
	return c.do(http.MethodPost, "/v1/threads/"+id+"/pause", nil, nil)
}

// Resume continues a paused or interrupted thread, with the client's
// caller's environment (SetCaller).
func (c *Client) Resume(id string) error {
	return c.do(http.MethodPost, "/v1/threads/"+id+"/resume", ResumeRequest{Caller: c.callerOr(nil)}, nil)
}

// Stop asks the host to shut down (see Host.Stop); it returns once the
// host agreed, not once it is gone: WaitStopped waits for that.
func (c *Client) Stop(force bool) (StopAnswer, error) {
	var ans StopAnswer
	err := c.do(http.MethodPost, "/v1/stop", StopRequest{Force: force}, &ans)
	if errors.Is(err, errNoRoute) {
		s, serr := c.Status()
		if serr != nil {
			return ans, err
		}
		return ans, fmt.Errorf("the engine host (pid %d) is older than `engine stop`; end it with kill %d", s.PID, s.PID)
	}
	return ans, err
}

// WaitStopped waits up to timeout until no host holds l's lock and its
// socket is gone, so that what comes next (a new host) starts afresh.
func WaitStopped(l storage.Layout, timeout time.Duration) error {
	sock := SocketPath(l)
	deadline := time.Now().Add(timeout)
	for {
		_, err := os.Lstat(sock)
		if !Running(l) && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the engine host did not stop within %s (see %s)", timeout, LogFile(l))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// errNoRoute is a request the host has no route for: a host older than
// this client.
var errNoRoute = errors.New("the engine host does not know this request")

// call sends a request and returns the answer's status and body,
// whatever the status.
func (c *Client) call(method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://engine"+path, body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *Client) do(method, path string, in, out any) error {
	status, b, err := c.call(method, path, in)
	if err != nil {
		return err
	}
	if status >= 300 {
		return failedAnswer(method, path, status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// failedAnswer is the error of a failed request's answer.
func failedAnswer(method, path string, status int, b []byte) error {
	var e codedAPIError
	if status == http.StatusForbidden && json.Unmarshal(b, &e) == nil && e.Error != "" {
		return fmt.Errorf("%w: %s", ErrRefused, e.Error)
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		if strings.Contains(e.Error, `unknown field "caller"`) || strings.Contains(e.Error, `unknown field "idempotencyKey"`) {
			// A host started by an older version, still running.
			return fmt.Errorf("%s: this engine host is older than this command; run `uncaged-workflow engine restart`", e.Error)
		}
		if err := keyErrorOf(e.Code, e.Error); err != nil {
			return err
		}
		return errors.New(e.Error)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return fmt.Errorf("%w: %s %s", errNoRoute, method, path)
	}
	return fmt.Errorf("engine host: %d %s", status, http.StatusText(status))
}

// SpawnSelf starts `<this executable> args...` as a detached background
// process (own session, output to the root's engine log), for Ensure.
func SpawnSelf(l storage.Layout, args ...string) func() error {
	return func() error {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(LogFile(l)), 0o755); err != nil {
			return err
		}
		logf, err := os.OpenFile(LogFile(l), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		// The child got its own copy of the descriptor; this process writes
		// nothing through logf, so its Close has nothing to lose.
		defer func() { _ = logf.Close() }()
		return startDetached(exe, args, logf)
	}
}
