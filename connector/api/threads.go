package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
	"github.com/uncaged/workflow/shared/fleet"
)

// ThreadSummary is one thread in GET /api/threads.
type ThreadSummary struct {
	ThreadID string `json:"threadId"`
	// Workflow is the registered name of the thread's bundle, or null.
	Workflow *string `json:"workflow"`
	// Hash is the thread's bundle hash.
	Hash string `json:"hash"`
	// StartedAt is when the thread started (ISO-8601): the time in its id,
	// else its first step's timestamp.
	StartedAt string `json:"startedAt"`
	// UpdatedAt is its last activity: updatedAt while active, completedAt
	// once finished (ISO-8601).
	UpdatedAt string         `json:"updatedAt"`
	Status    threads.Status `json:"status"`
	Source    threads.Source `json:"source"`
	// Prompt is the thread's prompt as the fleet's thread list shows it
	// (listedPrompt): at most fleet.PromptMaxRunes runes, the last
	// fleet.CutMark when cut; null when the prompt is not in the CAS.
	Prompt *string `json:"prompt"`
	// Usage is what the thread's model calls used (package usage); absent
	// when it made none.
	Usage *usage.Totals `json:"usage,omitempty"`
}

// ThreadList is GET /api/threads: one page, and how many threads matched.
type ThreadList struct {
	Threads []ThreadSummary `json:"threads"`
	Total   int             `json:"total"`
	// Damaged names the index and history files (relative to the storage
	// root) that could not be read completely: threads named only there
	// are missing from the list. It also names the line of each listed
	// thread whose head or start cannot back a status (its status is
	// "damaged"; threadId says which). Absent when there is nothing to
	// report.
	Damaged []DamagedFile `json:"damaged,omitempty"`
}

// DamagedFile is a place in a thread index or history file that cannot be
// read, or a line whose head or start cannot be trusted; `uncaged-workflow
// doctor` says what to do.
type DamagedFile struct {
	// Path is relative to the storage root, e.g. bundles/<hash>/threads.json.
	Path string `json:"path"`
	// Line is the 1-based line the damage starts on (0 for an entry of a
	// threads.json whose head or start cannot be trusted).
	Line int `json:"line"`
	// Reason says what is wrong there.
	Reason string `json:"reason"`
	// ThreadID is the thread whose head or start cannot be trusted, for
	// such a line; absent for a file that cannot be read.
	ThreadID string `json:"threadId,omitempty"`
}

// RunningSummary is one thread in GET /api/threads/running.
type RunningSummary struct {
	ThreadID     string         `json:"threadId"`
	Hash         string         `json:"hash"`
	WorkflowName *string        `json:"workflowName"`
	Status       threads.Status `json:"status"` // running, pausing or paused
	StartedAt    string         `json:"startedAt"`
	// Parent is the parent thread of a child thread, else null.
	Parent *string `json:"parent"`
}

// ThreadDetail is GET /api/threads/:id. Records holds a ThreadStartRecord,
// then a RoleRecord per step, then a ResultRecord once the thread ended.
type ThreadDetail struct {
	ThreadID string `json:"threadId"`
	Records  []any  `json:"records"`
	// Usage is what all the thread's model calls used (package usage).
	Usage usage.Totals `json:"usage"`
	// Damaged names the thread's line when its head or start cannot back
	// a status (the status is "damaged" and no step is shown: none can be
	// trusted); absent otherwise.
	Damaged []DamagedFile `json:"damaged,omitempty"`
}

// Record types, the "type" of every record.
const (
	RecordThreadStart    = "thread-start"
	RecordRole           = "role"
	RecordWorkflowResult = "workflow-result"
)

// ThreadStartRecord is the first record of a thread, the same in
// GET /api/threads/:id and in the live stream. It carries the original's
// REST fields (workflow, prompt, status) and its SSE fields (bundleHash,
// head, start, source); timestamp is the start time in milliseconds (the
// original sent null).
type ThreadStartRecord struct {
	Type       string         `json:"type"`
	ThreadID   string         `json:"threadId"`
	Workflow   string         `json:"workflow"` // the start node's name, or "unknown"
	Prompt     *string        `json:"prompt"`   // null when the prompt is not in the CAS
	Status     threads.Status `json:"status"`
	StartedAt  string         `json:"startedAt"`
	Timestamp  int64          `json:"timestamp"`
	BundleHash string         `json:"bundleHash"`
	Head       string         `json:"head"`
	Start      string         `json:"start"`
	Source     threads.Source `json:"source"`
	// Damaged is as in ThreadDetail, for the live stream, which has no
	// other place for it.
	Damaged []DamagedFile `json:"damaged,omitempty"`
}

// RoleRecord is one step of a thread.
type RoleRecord struct {
	Type        string `json:"type"`
	Role        string `json:"role"`
	ContentHash string `json:"contentHash"`
	// Content is the step's content text, or the original's placeholder
	// "(content not in CAS; contentHash=…)".
	Content   string          `json:"content"`
	Meta      json.RawMessage `json:"meta"`
	Timestamp int64           `json:"timestamp"`
	StateHash string          `json:"stateHash"`
	// ChildThread is the final state of a child thread the step ran, or null.
	ChildThread *string `json:"childThread"`
	// Usage is what the step's model calls used; absent when it made none
	// (in GET /api/threads/:id only).
	Usage *usage.Totals `json:"usage,omitempty"`
}

// ResultRecord is how a thread ended: its __end__ state. Unlike the
// original, it is sent for every __end__ (a missing return code reads as 1).
type ResultRecord struct {
	Type       string `json:"type"`
	ReturnCode int    `json:"returnCode"`
	Content    string `json:"content"` // the summary
	Timestamp  int64  `json:"timestamp"`
	StateHash  string `json:"stateHash"`
	// Usage is what the calls made while ending (the summarizer's) used.
	Usage *usage.Totals `json:"usage,omitempty"`
}

// validStatuses are the values ?status accepts.
var validStatuses = []threads.Status{
	threads.StatusRunning, threads.StatusWaiting, threads.StatusPausing, threads.StatusPaused, threads.StatusCompleted,
	threads.StatusFailed, threads.StatusKilled, threads.StatusInterrupted,
	threads.StatusDamaged,
}

// ThreadStatuses are the statuses a thread can be listed with, in the
// order a person reads them.
func ThreadStatuses() []threads.Status { return slices.Clone(validStatuses) }

// checkThreadRef answers 400 for an id threads.CheckRef refuses.
func checkThreadRef(id string) error {
	if err := threads.CheckRef(id); err != nil {
		return fail(http.StatusBadRequest, "%s", err.Error())
	}
	return nil
}

// resolve finds the thread :id names (threads.ResolveRef).
func (s *server) resolve(c echo.Context, id string) (threads.Record, error) {
	rec, err := threads.ResolveRef(s.opts.Layout, id)
	switch {
	case errors.Is(err, threads.ErrInvalidRef):
		return rec, fail(http.StatusBadRequest, "%s", err.Error())
	case errors.Is(err, threads.ErrNotFound) && errors.Is(err, threads.ErrDamaged):
		s.log.Warn("thread not found, and a damaged thread index may name it", "thread", id, "err", err)
		return rec, fail(http.StatusNotFound, "thread not found: %s; a damaged thread index on this machine may name it (uncaged-workflow doctor)", id)
	case errors.Is(err, threads.ErrNotFound):
		return rec, fail(http.StatusNotFound, "thread not found: %s", id)
	case err != nil:
		return rec, s.internal(c, err)
	}
	return rec, nil
}

// running asks the engine which threads it executes, by id. Without an
// engine nothing runs.
func (s *server) running() (map[string]host.RunningThread, error) {
	if s.opts.Engine == nil {
		return map[string]host.RunningThread{}, nil
	}
	list, err := s.opts.Engine.Running()
	return host.ByThread(list), err
}

// sight asks the engine which threads run, before a route that can still
// answer without it reads thread records (host.Sighting): an engine that
// does not answer is logged and counts as running nothing.
func (s *server) sight() *host.Sighting {
	return host.Sight(func() (map[string]host.RunningThread, error) {
		out, err := s.running()
		if err != nil {
			s.log.Warn("engine host did not say which threads run", "err", err)
		}
		return out, err
	})
}

// startedAt is when a thread started (ms): the time in its id, else its
// first step's timestamp, else its last activity.
func startedAt(store *cas.Store, rec threads.Record) int64 {
	if t, ok := ids.ThreadIDTime(rec.ThreadID); ok {
		return t.UnixMilli()
	}
	if frames, err := threads.Walk(store, rec.Head); err == nil && len(frames) > 0 {
		return frames[0].State.Payload.Timestamp
	}
	return rec.UpdatedAt
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func parseStatuses(v string) (map[threads.Status]bool, error) {
	out := map[threads.Status]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ok := false
		for _, st := range validStatuses {
			if threads.Status(part) == st {
				ok = true
			}
		}
		if !ok {
			return nil, fail(http.StatusBadRequest, "unknown status %q: want running, pausing, paused, completed, failed, killed, interrupted or damaged", part)
		}
		out[threads.Status(part)] = true
	}
	return out, nil
}

// threadsOf lists the threads of every version of a workflow, and the
// damaged places it read past; none for a name the registry does not know.
func (s *server) threadsOf(reg *registry.Registry, name string) ([]threads.Record, []*threads.DamageError, error) {
	e, ok := reg.Get(name)
	if !ok {
		return nil, nil, nil
	}
	seen := map[string]bool{}
	var out []threads.Record
	var damaged []*threads.DamageError
	hashes := []string{e.Hash}
	for _, v := range e.History {
		hashes = append(hashes, v.Hash)
	}
	for _, h := range hashes {
		if seen[h] || !ids.IsHash(h) {
			continue
		}
		seen[h] = true
		recs, d, err := threads.ListBundleTolerant(s.opts.Layout, h)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, recs...)
		damaged = append(damaged, d...)
	}
	return out, damaged, nil
}

// damagedFiles turns damage into the list's form, paths relative to the
// storage root (the list travels through the gateway; the machine's
// directory layout is none of its business).
func (s *server) damagedFiles(damaged []*threads.DamageError) []DamagedFile {
	var out []DamagedFile
	for _, d := range damaged {
		p := d.Path
		if rel, err := filepath.Rel(s.opts.Layout.Root, d.Path); err == nil {
			p = filepath.ToSlash(rel)
		}
		out = append(out, DamagedFile{Path: p, Line: d.Line, Reason: d.Reason, ThreadID: d.Thread})
	}
	return out
}

func (s *server) listThreads(c echo.Context) error {
	page, err := parsePage(c)
	if err != nil {
		return err
	}
	want, err := parseStatuses(c.QueryParam("status"))
	if err != nil {
		return err
	}
	reg, err := s.registry(c)
	if err != nil {
		return err
	}
	seen := s.sight() // before the records: see host.Sighting
	var recs []threads.Record
	var damaged []*threads.DamageError
	if name := c.QueryParam("workflow"); name != "" {
		recs, damaged, err = s.threadsOf(reg, name)
	} else {
		recs, damaged, err = threads.ListTolerant(s.opts.Layout)
	}
	if err != nil {
		return s.internal(c, err)
	}
	for _, d := range damaged {
		s.log.Warn("damaged thread index: its threads are missing from the list", "path", d.Path, "line", d.Line, "reason", d.Reason)
	}

	type row struct {
		rec     threads.Record
		started int64
		status  threads.Status
	}
	// judge sets a row's status; a thread whose head or start cannot back
	// one is reported with the damaged files (after them, in list order).
	var unsound []*threads.DamageError
	judge := func(r *row, seen *host.Sighting) {
		var d *threads.DamageError
		if r.status, d = seen.Status(s.store, r.rec); d != nil {
			s.log.Warn("a listed thread's head cannot back a status", "path", d.Path, "line", d.Line, "reason", d.Reason)
			unsound = append(unsound, d)
		}
	}
	rows := make([]row, len(recs))
	for i, r := range recs {
		rows[i] = row{rec: r, started: startedAt(s.store, r)}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].started != rows[j].started {
			return rows[i].started > rows[j].started
		}
		return rows[i].rec.ThreadID > rows[j].rec.ThreadID
	})
	if len(want) > 0 {
		kept := rows[:0]
		for _, r := range rows {
			judge(&r, seen)
			if want[r.status] {
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	total := len(rows)
	rows = Window(rows, page.offset, page.limit)
	names := reg.BundleNames()
	var prices registry.Prices
	if cfg := reg.Config(); cfg != nil {
		prices = cfg.Prices
	}
	out := ThreadList{Threads: make([]ThreadSummary, 0, len(rows)), Total: total}
	for _, r := range rows {
		if r.status == "" {
			judge(&r, seen)
		}
		out.Threads = append(out.Threads, ThreadSummary{
			ThreadID: r.rec.ThreadID, Workflow: optional(names[r.rec.BundleHash]), Hash: r.rec.BundleHash,
			StartedAt: isoTime(r.started), UpdatedAt: isoTime(r.rec.UpdatedAt), Status: r.status, Source: r.rec.Source,
			Prompt: s.prompts.listed(s.store, r.rec.Start), Usage: s.threadUsage(r.rec, prices),
		})
	}
	out.Damaged = s.damagedFiles(append(damaged, unsound...))
	return c.JSON(http.StatusOK, out)
}

// promptCacheBytes bounds what promptCache holds: the listed prompts of
// some tens of thousands of threads.
const promptCacheBytes = 8 << 20

// promptCache keeps the listed prompt of each start node read. A start
// node never changes, nor does the prompt it names, and reading them is
// two node parses a thread: half of what a whole list of thousands of
// threads costs without it. A prompt not in the CAS is not kept (it may
// come back). When full, it starts afresh.
type promptCache struct {
	mu    sync.Mutex
	byKey map[string]*string // by start hash
	size  int
}

// listed is the listed prompt (listedPrompt) of the thread whose start
// node is start.
func (c *promptCache) listed(store *cas.Store, start string) *string {
	c.mu.Lock()
	p, ok := c.byKey[start]
	c.mu.Unlock()
	if ok {
		return p
	}
	_, full := startInfo(store, start)
	p = listedPrompt(full)
	if p == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil || c.size > promptCacheBytes {
		c.byKey, c.size = map[string]*string{}, 0
	}
	c.byKey[start] = p
	c.size += len(start) + len(*p)
	return p
}

// listedPrompt is a prompt as the thread lists show it, the machine's and
// the fleet's alike: cut to fleet.PromptMaxRunes runes; nil stays nil (the
// prompt is not in the CAS).
func listedPrompt(prompt *string) *string {
	if prompt == nil {
		return nil
	}
	cut := fleet.TruncatePrompt(*prompt)
	return &cut
}

// threadUsage is what rec's model calls used, priced at prices; nil when
// it made none, or its usage file cannot be read (which is logged: usage
// is an account, and a list or summary still answers without it).
func (s *server) threadUsage(rec threads.Record, prices registry.Prices) *usage.Totals {
	spent, err := usage.ThreadTotals(s.opts.Layout, rec.BundleHash, rec.ThreadID, prices)
	if err != nil {
		s.log.Warn("reading a thread's model usage", "thread", rec.ThreadID, "err", err)
		return nil
	}
	if spent.Calls == 0 {
		return nil
	}
	return &spent
}

func (s *server) runningThreads(c echo.Context) error {
	out := []RunningSummary{}
	if s.opts.Engine != nil {
		list, err := s.opts.Engine.Running()
		if err != nil {
			return fail(http.StatusBadGateway, "engine host: %s", err.Error())
		}
		for _, r := range list {
			if r.Starting {
				continue // not to be found yet: its first records are being written
			}
			started := r.StartedAt
			if t, ok := ids.ThreadIDTime(r.ThreadID); ok {
				started = t.UnixMilli()
			}
			status := r.Status
			if status == "" {
				status = threads.StatusRunning
			}
			out = append(out, RunningSummary{
				ThreadID: r.ThreadID, Hash: r.BundleHash, WorkflowName: optional(r.Workflow),
				Status: status, StartedAt: isoTime(started), Parent: optional(r.Parent),
			})
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"threads": out})
}

func (s *server) getThread(c echo.Context) error {
	seen := s.sight() // before the records: see host.Sighting
	rec, err := s.resolve(c, c.Param("id"))
	if err != nil {
		return err
	}
	status, damage := seen.Status(s.store, rec)
	start := s.threadStart(rec, status, damage)
	records := []any{start}
	if damage == nil {
		steps, _, err := s.stepRecords(rec.Head)
		if err != nil {
			return s.internal(c, err)
		}
		records = append(records, steps...)
	} else {
		s.log.Warn("thread's head cannot back a status", "path", damage.Path, "line", damage.Line, "reason", damage.Reason)
	}
	total, err := s.addUsage(rec, records)
	if err != nil {
		return s.internal(c, err)
	}
	return c.JSON(http.StatusOK, ThreadDetail{ThreadID: rec.ThreadID, Records: records, Usage: total, Damaged: start.Damaged})
}

// threadStart builds the thread-start record of a thread whose status is
// status: threads.StatusDamaged with damage saying why, or any other with
// damage nil.
func (s *server) threadStart(rec threads.Record, status threads.Status, damage *threads.DamageError) ThreadStartRecord {
	started := startedAt(s.store, rec)
	out := ThreadStartRecord{
		Type: RecordThreadStart, ThreadID: rec.ThreadID, Workflow: "unknown", Status: status,
		StartedAt: isoTime(started), Timestamp: started,
		BundleHash: rec.BundleHash, Head: rec.Head, Start: rec.Start, Source: rec.Source,
	}
	if damage != nil {
		out.Damaged = s.damagedFiles([]*threads.DamageError{damage})
	}
	name, prompt := startInfo(s.store, rec.Start)
	if name != "" {
		out.Workflow = name
	}
	out.Prompt = prompt
	return out
}

// startInfo reads what a thread's start node says: the workflow's name
// ("" when it names none) and the prompt (nil when it is not in the CAS).
func startInfo(store *cas.Store, start string) (name string, prompt *string) {
	n, err := store.GetNode(start)
	if err != nil {
		return "", nil
	}
	st, ok := n.(node.Start)
	if !ok {
		return "", nil
	}
	if len(st.Refs) > 0 {
		if p, ok := contentPayload(store, st.Refs[0]); ok {
			prompt = &p
		}
	}
	return st.Payload.Name, prompt
}

// stepRecords returns a RoleRecord per step of the chain ending at head
// (fork-branch frames skipped) and, when the chain ends in __end__, a
// ResultRecord; ended reports that.
func (s *server) stepRecords(head string) (records []any, ended bool, err error) {
	frames, err := threads.Walk(s.store, head)
	if err != nil {
		return nil, false, err
	}
	records, ended = s.frameRecords(nil, frames)
	return records, ended, nil
}

// frameRecords appends to records those of frames, states of a chain
// oldest first, as stepRecords makes them.
func (s *server) frameRecords(records []any, frames []threads.Frame) (_ []any, ended bool) {
	for _, f := range frames {
		p := f.State.Payload
		switch p.Role {
		case node.RoleFork:
			continue
		case node.RoleEnd:
			records = append(records, ResultRecord{
				Type: RecordWorkflowResult, ReturnCode: f.State.ReturnCode(), Content: f.State.Summary(),
				Timestamp: p.Timestamp, StateHash: f.Hash,
			})
			return records, true
		}
		meta, err := p.Meta.MarshalJSON()
		if err != nil {
			meta = []byte("{}")
		}
		text, ok := contentPayload(s.store, p.Content)
		if !ok {
			text = "(content not in CAS; contentHash=" + p.Content + ")"
		}
		records = append(records, RoleRecord{
			Type: RecordRole, Role: p.Role, ContentHash: p.Content, Content: text, Meta: meta,
			Timestamp: p.Timestamp, StateHash: f.Hash, ChildThread: optional(p.ChildThread),
		})
	}
	return records, false
}

// contentPayload reads a content node's text.
func contentPayload(store *cas.Store, hash string) (string, bool) {
	if !ids.IsHash(hash) {
		return "", false
	}
	return threads.ContentPayload(store, hash)
}

// readObject reads the request body as a JSON object (see decodeObject).
func readObject(c echo.Context, allowEmpty bool) (map[string]any, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	return decodeObject(body, allowEmpty)
}

// decodeObject parses a JSON object body. An empty body is an empty object
// only when allowEmpty says so.
func decodeObject(body []byte, allowEmpty bool) (map[string]any, error) {
	if allowEmpty && len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fail(http.StatusBadRequest, "invalid JSON body")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(http.StatusBadRequest, "invalid JSON body")
	}
	obj, _ := v.(map[string]any)
	return obj, nil
}

func (s *server) engine() (Engine, error) {
	if s.opts.Engine == nil {
		return nil, fail(http.StatusServiceUnavailable, "no engine host is available to act on threads")
	}
	return s.opts.Engine, nil
}

// IdempotencyKeyHeader names the key a POST /api/threads may carry so
// that, sent again (by a gateway that cannot tell whether its first
// request got through), it starts no second thread.
const IdempotencyKeyHeader = "Idempotency-Key"

// IdempotentReplayedHeader is set to "true" on the answer of a run whose
// idempotency key had already started its thread: nothing was started.
const IdempotentReplayedHeader = "Idempotent-Replayed"

// idempotencyKey is the request's Idempotency-Key ("" when it sends
// none); a key sent twice, or one host.CheckIdempotencyKey refuses, is a
// 400.
func idempotencyKey(c echo.Context) (string, error) {
	keys := c.Request().Header.Values(IdempotencyKeyHeader)
	switch {
	case len(keys) == 0:
		return "", nil
	case len(keys) > 1:
		return "", fail(http.StatusBadRequest, "%s sent %d times; send one", IdempotencyKeyHeader, len(keys))
	}
	if err := host.CheckIdempotencyKey(keys[0]); err != nil {
		return "", fail(http.StatusBadRequest, "%s: %s", IdempotencyKeyHeader, err.Error())
	}
	return keys[0], nil
}

func (s *server) runThread(c echo.Context) error {
	obj, err := readObject(c, false)
	if err != nil {
		return err
	}
	name, ok1 := obj["workflow"].(string)
	prompt, ok2 := obj["prompt"].(string)
	if !ok1 || !ok2 {
		return fail(http.StatusBadRequest, "workflow (string) and prompt (string) are required")
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	reg, err := s.registry(c)
	if err != nil {
		return err
	}
	if _, ok := reg.Get(name); !ok {
		if err := registry.ValidateName(name); err != nil {
			return fail(http.StatusBadRequest, "%s", err.Error())
		}
		return fail(http.StatusNotFound, "workflow not found: %s", name)
	}
	eng, err := s.engine()
	if err != nil {
		return err
	}
	if key == "" {
		id, err := eng.Run(name, prompt)
		if err != nil {
			return fail(http.StatusBadRequest, "%s", err.Error())
		}
		return c.JSON(http.StatusCreated, host.ThreadRef{ThreadID: id})
	}
	once, ok := eng.(OnceEngine)
	if !ok {
		return fail(http.StatusNotImplemented, "this machine's engine cannot keep idempotency keys; send the run without %s", IdempotencyKeyHeader)
	}
	out, err := once.RunOnce(host.RunRequest{Workflow: name, Prompt: prompt, IdempotencyKey: key})
	switch {
	case errors.Is(err, host.ErrIdempotencyKeyReused):
		return fail(http.StatusUnprocessableEntity, "%s", err.Error())
	case errors.Is(err, host.ErrIdempotencyKeyUnsettled):
		return fail(http.StatusConflict, "%s", err.Error())
	case err != nil:
		return fail(http.StatusBadRequest, "%s", err.Error())
	case out.Replayed:
		c.Response().Header().Set(IdempotentReplayedHeader, "true")
		return c.JSON(http.StatusOK, host.ThreadRef{ThreadID: out.ThreadID})
	}
	return c.JSON(http.StatusCreated, host.ThreadRef{ThreadID: out.ThreadID})
}

// act builds kill, pause and resume: resolve the thread (404 when unknown),
// ask the engine (400 with its message when it refuses).
func (s *server) act(verb string, fn func(Engine, string) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		rec, err := s.resolve(c, c.Param("id"))
		if err != nil {
			return err
		}
		eng, err := s.engine()
		if err != nil {
			return err
		}
		if err := fn(eng, rec.ThreadID); err != nil {
			s.log.Info("thread action refused", "action", verb, "thread", rec.ThreadID, "err", err)
			return fail(http.StatusBadRequest, "%s", err.Error())
		}
		return c.JSON(http.StatusOK, okBody)
	}
}

func (s *server) forkThread(c echo.Context) error {
	if err := checkThreadRef(c.Param("id")); err != nil {
		return err
	}
	obj, err := readObject(c, true)
	if err != nil {
		return err
	}
	if obj == nil {
		return fail(http.StatusBadRequest, "request body must be a JSON object")
	}
	fromRole := ""
	switch v := obj["fromRole"].(type) {
	case nil:
	case string:
		if v != "" && strings.TrimSpace(v) == "" {
			return fail(http.StatusBadRequest, "fromRole must name a role")
		}
		fromRole = v
	default:
		return fail(http.StatusBadRequest, "fromRole must be a string")
	}
	step, err := forkStep(obj["step"])
	if err != nil {
		return err
	}
	if step != 0 && fromRole != "" {
		return fail(http.StatusBadRequest, "fork at a step or from a role, not both")
	}
	rec, err := s.resolve(c, c.Param("id"))
	if err != nil {
		return err
	}
	eng, err := s.engine()
	if err != nil {
		return err
	}
	id, err := eng.Fork(rec.ThreadID, host.ForkRequest{FromRole: fromRole, Step: step})
	if err != nil {
		return fail(http.StatusBadRequest, "%s", err.Error())
	}
	return c.JSON(http.StatusCreated, host.ThreadRef{ThreadID: id})
}

// forkStep reads the fork body's "step": absent or null is 0 (no step),
// else a whole number from 1, the role step's place in the thread's
// records (the dashboard's "Fork from here" on a role that ran twice).
func forkStep(v any) (int, error) {
	if v == nil {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fail(http.StatusBadRequest, "step must be a number")
	}
	i, err := strconv.Atoi(n.String())
	if err != nil || i < 1 {
		return 0, fail(http.StatusBadRequest, "step must be a whole number from 1: %s", n)
	}
	return i, nil
}
