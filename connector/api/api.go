// Package api is the connector's local REST API: the routes the dashboard
// reads a machine's workflows, threads and content-addressed store through,
// served locally or through the gateway tunnel.
//
// The routes and JSON shapes are the original's (docs/compatibility.md),
// fixed where the original was wrong: a thread's startedAt is when it
// really started (not its last activity) and updatedAt is reported beside
// it; workflow summaries carry "hash"; REST and SSE share one thread-start
// record; thread lists page and filter (?limit&offset&status&workflow); an
// unknown workflow in POST /api/threads is a 404. Every error is JSON
// {"error": "..."}.
//
// A thread whose line names a head or start that cannot back a status
// (threads.ReadStatus: not in the CAS, unreadable, not hashing to its
// name, not on the line's start's chain) has the status "damaged" in every
// answer and event, and no steps; the answer's "damaged" field (a list
// and a thread's detail, and the live stream's thread-start record) names
// its file, line and threadId. A sound thread's answer has no such field.
//
// Routes (every GET answers HEAD too, shared/echohead):
//
//	GET    /healthz, /api/healthz           {"ok":true}
//	GET    /api/workflows                   {"workflows":[WorkflowSummary]}
//	GET    /api/workflows/:name             WorkflowDetail
//	GET    /api/workflows/:name/history     {"name","history":[{hash,timestamp,current}]}
//	GET    /api/workflows/:name/versions/:hash  WorkflowVersion
//	POST   /api/workflows/:name/rollback    {"hash"?} → {"name","hash","timestamp"}
//	GET    /api/bundles/:hash               BundleDetail (a thread's bundle: source with its agents' env and args hidden, descriptor, workflows)
//	GET    /api/threads                     {"threads":[ThreadSummary],"total"}
//	GET    /api/threads/running             {"threads":[RunningSummary]}
//	POST   /api/threads                     {"workflow","prompt"} → 201 {"threadId"}; Idempotency-Key:
//	                                        a repeat of the key → 200, the same body, Idempotent-Replayed:
//	                                        true, nothing started; the key with another workflow or
//	                                        prompt → 422 (threads.go)
//	GET    /api/threads/:id                 {"threadId","records":[record]}
//	GET    /api/threads/:id/live            text/event-stream (below)
//	POST   /api/threads/:id/kill|pause|resume  {"ok":true}
//	POST   /api/threads/:id/fork            {"fromRole"?|"step"?} → 201 {"threadId"}
//	GET    /api/cas                         {"hashes":[…],"total"}
//	POST   /api/cas                         {"content"} → 201 {"hash"}
//	GET    /api/cas/:hash                   {"hash","content"}
//	DELETE /api/cas/:hash                   {"ok":true}
//	POST   /api/cas/gc                      gc.Result
//	GET    /api/events                      text/event-stream of thread summaries for the gateway (events.go, shared/fleet)
//	GET    /api/usage                       UsageReport: model tokens and cost per workflow (?since&until&workflow; usage.go)
//
// Errors: 400 for input that is wrong (bad JSON, missing or mistyped
// fields, ids that are not letters, digits, '-' or '_', malformed hashes,
// invalid workflow names, bad ?limit/?offset/?status, an action the engine
// refuses), 404 for what does not exist (thread, workflow, CAS entry,
// route), 405 for a wrong method, 413 for a body over the limit, 502 when
// the engine host fails to say what runs (GET /api/threads/running; other
// routes then treat nothing as running), 503 when no Engine is configured,
// 500 for storage failures and panics.
//
// # Live stream
//
// GET /api/threads/:id/live answers a JSON 404 for an unknown thread, else
// streams text/event-stream: "record" events (the thread-start record, then
// each step as it is written, oldest first, then the workflow-result; step
// records carry their model usage), "start" events (the thread-start record
// again when its head or status moved; it replaces record 1 and adds no
// record), "info" events (debug-log lines as they are appended), a ": ping" comment
// every 15 s, and finally "done" with {"reason":"completed"} once the thread
// has ended, {"reason":"not-running"} when it is unfinished and no engine
// host runs it, or {"reason":"damaged"} when its head cannot back a status
// and no engine host is moving it on. Every event's id is "<records>:<logOffset>": how many
// records have been sent (the thread-start is record 1, the first step 2)
// and the debug-log byte offset reached. A reconnecting client sends the
// last id back as Last-Event-ID and gets neither a record nor a log line
// twice ("<records>" alone is accepted too; info then restarts at the
// beginning of the log; anything else is a 400).
//
// The stream sends a change as soon as the engine host tells of it
// (wake.go): steps, statuses and debug-log lines are read from the files
// when the host says the thread moved, not on a timer.
//
// New returns an *echo.Echo, which is an http.Handler: serve it with
// net/http directly, or hand it requests from the tunnel. The live route
// streams for as long as a thread runs, so a server in front of it must not
// set a WriteTimeout (the route clears the write deadline where the
// ResponseWriter supports it).
package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/host/wake"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/echohead"
)

// DefaultBodyLimit is the largest request body accepted when Options sets
// none: 1 MiB, as the original.
const DefaultBodyLimit int64 = 1 << 20

// Defaults of the live route and the event feed, which wake when the
// engine host tells of a change (wake.go) and look on a timer only where
// nothing can tell them.
const (
	// DefaultLivePoll is how often they look for new steps, statuses and
	// debug-log lines while the engine host cannot tell of changes (it is
	// older than its change stream, or the Engine is not a HostEngine).
	DefaultLivePoll = 100 * time.Millisecond
	// DefaultSlowPoll is how often they look where only programs other
	// than this engine can write: no engine host runs, or the original
	// engine's worker runs the thread on a root shared with it.
	DefaultSlowPoll = time.Second
	// DefaultLivePing is how often the live route sends a ": ping" comment
	// so proxies and clients see the stream is alive while a step runs.
	DefaultLivePing = 15 * time.Second
)

// Engine acts on threads. Production passes a HostEngine (the storage
// root's engine host); reading routes never need one.
type Engine interface {
	// Run starts a thread of a registered workflow and returns its id.
	Run(workflow, prompt string) (string, error)
	// Kill ends a thread with return code 130.
	Kill(id string) error
	// Pause holds a running thread after its current step.
	Pause(id string) error
	// Resume continues a paused thread or restarts an interrupted one.
	Resume(id string) error
	// Fork starts a copy of a thread replaying its steps up to req's step,
	// or fromRole's first step ("": all but the last), and returns the new
	// id (req.Caller is the Engine's to fill).
	Fork(id string, req host.ForkRequest) (string, error)
	// Running lists the threads being executed; none (and no error) when
	// no engine host runs.
	Running() ([]host.RunningThread, error)
	// Answer answers the question a waiting thread asks (host.Answer).
	Answer(id string, req host.AnswerRequest) (host.Answered, error)
}

// Options configure the API.
type Options struct {
	// Layout is the storage root served.
	Layout storage.Layout
	// Engine acts on threads and says which run. nil: nothing runs, and the
	// routes that act on threads answer 503.
	Engine Engine
	// BodyLimit caps request bodies (0: DefaultBodyLimit). Larger bodies
	// get 413 {"error":"Payload too large"}, whether the Content-Length
	// says so or the body turns out longer while it is read.
	BodyLimit int64
	// Logger receives one line per request (info; probes at debug level,
	// requestlog.go), internal errors and recovered panics (nil: discard).
	Logger *slog.Logger
	// AllowOrigins are the browser origins whose pages may call the API
	// (CORS); none by default (--allow-origin).
	AllowOrigins Origins
	// LivePoll, SlowPoll and LivePing tune the live route and the event
	// feed (0: the defaults).
	LivePoll time.Duration
	SlowPoll time.Duration
	LivePing time.Duration

	// liveExit, when set, is called as a live handler returns (tests).
	liveExit func(threadID string)
}

type server struct {
	opts    Options
	store   *cas.Store
	log     *slog.Logger
	gcMu    sync.Mutex // one collection at a time
	prompts promptCache
	wakes   *wake.Hub // wakes the live streams and the feed (wake.go)
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

var okBody = map[string]bool{"ok": true}

// New builds the API over opts. Middleware, outermost first: panic recovery
// (500 {"error":"Internal server error"}), request id and log line
// (X-Request-Id, requestlog.go), CORS
// for Options.AllowOrigins, body limit.
func New(opts Options) *echo.Echo {
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LivePoll <= 0 {
		opts.LivePoll = DefaultLivePoll
	}
	if opts.SlowPoll <= 0 {
		opts.SlowPoll = DefaultSlowPoll
	}
	if opts.LivePing <= 0 {
		opts.LivePing = DefaultLivePing
	}
	s := &server{opts: opts, store: cas.Open(opts.Layout.CASDir()), log: opts.Logger}
	s.wakes = newWakeHub(opts.Engine, opts.SlowPoll, opts.Logger)

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	echohead.Install(e) // every GET route below answers HEAD too
	e.Use(
		middleware.RecoverWithConfig(middleware.RecoverConfig{
			DisableStackAll: true,
			LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
				s.log.Error("panic in handler", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err, "stack", string(stack))
				return recovered{err}
			},
		}),
		s.requestLog(),
		middleware.CORSWithConfig(middleware.CORSConfig{
			// A function, not AllowOrigins: an empty list there means "*".
			AllowOriginFunc: func(origin string) (bool, error) { return opts.AllowOrigins.Admits(origin), nil },
			AllowMethods:    []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodOptions},
			AllowHeaders:    []string{echo.HeaderContentType, "X-Client-Token", "Last-Event-ID", IdempotencyKeyHeader},
			ExposeHeaders:   []string{echo.HeaderXRequestID, IdempotentReplayedHeader},
		}),
		s.bodyLimit,
	)

	health := func(c echo.Context) error { return c.JSON(http.StatusOK, okBody) }
	e.GET("/healthz", health)
	e.GET("/api/healthz", health)

	e.GET("/api/workflows", s.listWorkflows)
	e.GET("/api/workflows/:name", s.getWorkflow)
	e.GET("/api/workflows/:name/history", s.workflowHistory)
	e.GET("/api/workflows/:name/versions/:hash", s.workflowVersion)
	e.POST("/api/workflows/:name/rollback", s.rollbackWorkflow)
	e.GET("/api/bundles/:hash", s.getBundle)

	e.GET("/api/threads", s.listThreads)
	e.POST("/api/threads", s.runThread)
	e.GET("/api/threads/running", s.runningThreads)
	e.GET("/api/threads/:id", s.getThread)
	e.GET("/api/threads/:id/live", s.live)
	e.GET("/api/events", newFeed(s).serve) // the fleet's change stream (events.go)
	e.GET("/api/usage", s.machineUsage)
	e.POST("/api/threads/:id/kill", s.act("kill", Engine.Kill))
	e.POST("/api/threads/:id/pause", s.act("pause", Engine.Pause))
	e.POST("/api/threads/:id/resume", s.act("resume", Engine.Resume))
	e.POST("/api/threads/:id/fork", s.forkThread)
	e.GET("/api/threads/:id/question", s.getQuestion)
	e.POST("/api/threads/:id/answer", s.answerThread)

	e.GET("/api/cas", s.listCAS)
	e.POST("/api/cas", s.putCAS)
	e.POST("/api/cas/gc", s.gcCAS)
	e.GET("/api/cas/:hash", s.getCAS)
	e.DELETE("/api/cas/:hash", s.deleteCAS)
	mountMetrics(e, opts.Engine, s.wakes) // GET /metrics (metrics.go)
	return e
}

// fail is an error response with a message the client sees.
func fail(code int, format string, args ...any) error {
	return echo.NewHTTPError(code, fmt.Sprintf(format, args...))
}

// recovered is a panic the recover middleware turned into an error.
type recovered struct{ error }

var errTooLarge = echo.NewHTTPError(http.StatusRequestEntityTooLarge, "Payload too large")

// handleError writes every error as {"error": msg}: the message of an
// HTTPError, and "Internal server error" for anything else (which is
// logged, not shown).
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "Internal server error"
	var he *echo.HTTPError
	switch {
	case errors.Is(err, echo.ErrNotFound):
		code, msg = http.StatusNotFound, "not found"
	case errors.Is(err, echo.ErrMethodNotAllowed):
		code, msg = http.StatusMethodNotAllowed, "method not allowed"
	case errors.As(err, &he):
		code = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(code)
		}
	default:
		if !errors.As(err, new(recovered)) { // a panic was logged with its stack
			s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		}
	}
	// HEAD gets the same headers as GET (the server drops the body), so a
	// checker probing with HEAD sees what a GET would have said.
	if err := c.JSON(code, errorBody{msg}); err != nil {
		s.log.Debug("writing error response", "err", err)
	}
}

// internal reports a storage failure with its message (a local API: the
// reader is the machine's owner, and "permission denied on …" helps).
func (s *server) internal(c echo.Context, err error) error {
	s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	return fail(http.StatusInternalServerError, "%s", err.Error())
}

// bodyLimit rejects a declared Content-Length over the limit and caps the
// body while it is read, so a chunked or lying client is stopped too.
func (s *server) bodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > s.opts.BodyLimit {
			return errTooLarge
		}
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = http.MaxBytesReader(c.Response(), req.Body, s.opts.BodyLimit)
		}
		return next(c)
	}
}

// readBody reads the whole (limited) request body.
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errTooLarge
	case err != nil:
		return nil, fail(http.StatusBadRequest, "could not read request body")
	}
	return b, nil
}

// pageParams are ?limit and ?offset: non-negative integers, limit 0 (or
// absent) meaning no limit, as the CLI's --limit.
type pageParams struct{ limit, offset int }

func parsePage(c echo.Context) (pageParams, error) {
	var p pageParams
	for _, f := range []struct {
		name string
		dst  *int
	}{{"limit", &p.limit}, {"offset", &p.offset}} {
		v := c.QueryParam(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, fail(http.StatusBadRequest, "%s must be a non-negative integer", f.name)
		}
		*f.dst = n
	}
	return p, nil
}

// Window returns the items that offset and limit select: those after the
// first offset, at most limit of them (0: all). The REST API's ?offset and
// ?limit and the CLI's --offset and --limit both page with it, so a list
// reads the same through either.
func Window[T any](items []T, offset, limit int) []T {
	if offset >= len(items) {
		return items[:0]
	}
	items = items[offset:]
	if limit > 0 && limit < len(items) {
		items = items[:limit]
	}
	return items
}

// isoTime formats milliseconds since the epoch as JavaScript's
// Date#toISOString does.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
