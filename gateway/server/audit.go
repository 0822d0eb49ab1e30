package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
)

// The audit log: every change made through the gateway is an entry in the
// store (store.AppendAudit) naming who (the token's id and note, or
// store.SharedSecretActor), from where (the client's address, as the
// trusted proxies tell it), what (the action, the machine, the target)
// and how it ended (the HTTP status). Never a credential: entries name
// tokens by id, and no query string is kept (it may carry ?key=).
//
// Changes to a machine are proxied requests to its connector, recognised
// by method and path of the connector's REST API (connector/api):
//
//	POST   threads                      start      (target: the new thread's id)
//	POST   threads/:id/kill|pause|resume kill, pause, resume
//	POST   threads/:id/answer           answer     (a person's answer to a waiting thread)
//	POST   threads/:id/fork             fork       (target: "id -> new id")
//	POST   workflows/:name/rollback     rollback   (target: "name@hash")
//	DELETE cas/:hash                    cas-delete
//	POST   cas/gc                       gc
//	POST   cas                          cas-put    (target: the hash)
//
// Any other request that is not GET, HEAD or OPTIONS is recorded as
// "other" with its method and path, so a route added to the connector is
// not silently left out. The gateway's own changes are login and logout
// here; token-create and token-revoke are the token routes' (recordAudit);
// connect, replace, takeover and connect-refused are the connections'
// (takeover.go: who, from where, which instance by fingerprint, which it
// replaced); register and unregister the original clients' registrations
// (register.go); and refused is every other state-changing request
// answered 401 or 403, whatever route refused it (auditrefusals.go).
// Entries others set the pace of (refusals, a storm of replacements) are
// coalesced: a burst a minute per kind, then one summary counting the
// rest (auditcoalesce.go).
//
// Writing never slows a request: entries go to the store's queue
// (storewrites.go), which one writer empties in order. While the store
// does not answer they wait there, in memory and then in a spill file;
// past both bounds an entry is dropped, logged and counted
// (uncaged_gateway_audit_dropped_total), never waited for. Each entry
// carries a key drawn when it was made, so that one written twice (its
// answer lost, a spill file replayed) is in the log once. Run flushes the
// queue after the HTTP server has drained and before the store closes
// (closeAudit).

// Actions of the audit log.
const (
	ActionStart  = "start"
	ActionKill   = "kill"
	ActionPause  = "pause"
	ActionResume = "resume"
	// ActionAnswer is a person's answer to a thread waiting for one
	// (issue 29); its target is the thread.
	ActionAnswer      = "answer"
	ActionFork        = "fork"
	ActionRollback    = "rollback"
	ActionCASDelete   = "cas-delete"
	ActionCASPut      = "cas-put"
	ActionGC          = "gc"
	ActionOther       = "other"
	ActionLogin       = "login"
	ActionLogout      = "logout"
	ActionTokenCreate = "token-create"
	ActionTokenRevoke = "token-revoke"
	// Connections (takeover.go): a connector that has its name now, after
	// nobody, after the same instance, or after another instance
	// (--takeover); and one refused it.
	ActionConnect        = "connect"
	ActionReplace        = "replace"
	ActionTakeover       = "takeover"
	ActionConnectRefused = "connect-refused"
	// Original clients' registrations (register.go).
	ActionRegister   = "register"
	ActionUnregister = "unregister"
	// ActionRefused is any state-changing request refused 401 or 403
	// (auditrefusals.go).
	ActionRefused = "refused"
)

// auditActions are the actions GET /api/gateway/audit may filter on.
var auditActions = []string{ActionStart, ActionKill, ActionPause, ActionResume, ActionAnswer, ActionFork, ActionRollback,
	ActionCASDelete, ActionCASPut, ActionGC, ActionOther, ActionLogin, ActionLogout, ActionTokenCreate, ActionTokenRevoke,
	ActionConnect, ActionReplace, ActionTakeover, ActionConnectRefused, ActionRegister, ActionUnregister, ActionRefused,
	ActionTriggerCreate, ActionTriggerDelete, ActionTriggerPause, ActionTriggerResume, ActionTriggerRotateSecret, ActionTriggerRun}

// Reasons an audit entry is lost (the dropped metric's label).
const (
	auditDropFull   = "queue_full"
	auditDropStore  = "store_error"
	auditDropClosed = "closed"
)

// maxTarget bounds an entry's target: a path segment a client chose.
const maxTarget = 256

// captureLimit bounds the part of a response read for its target (a new
// thread's id, a hash): those answers are small JSON objects.
const captureLimit = 4 << 10

// auditLog records entries through the store's queue.
type auditLog struct {
	// writes is the store's queue; nil when the gateway keeps nothing
	// (then nothing is recorded).
	writes  *storeWrites
	logger  *slog.Logger
	dropped *prometheus.CounterVec

	// coalesce bounds the entries others set the pace of
	// (auditcoalesce.go); stopSweeping ends its sweeps.
	coalesce     *coalescer
	stopSweeping chan struct{}
	stopOnce     sync.Once
}

// newAuditLog makes the audit log, which records nothing until it has
// the store's queue (a gateway without a store never does).
func newAuditLog(m *metrics.Gateway, logger *slog.Logger) *auditLog {
	a := &auditLog{logger: logger,
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_audit_dropped_total",
			Help: "Audit entries lost, by reason: the store's queue was full in memory and on disk, the store refused them, or they came after shutdown.",
		}, []string{"reason"})}
	for _, r := range []string{auditDropFull, auditDropStore, auditDropClosed} {
		a.dropped.WithLabelValues(r) // shown at 0 before the first loss
	}
	a.coalesce = newCoalescer(a.add, time.Now, auditWindow)
	m.Registry().MustRegister(a.dropped, a.coalesce.coalesced)
	a.stopSweeping = make(chan struct{})
	return a
}

// record starts recording into w, the store's queue: called once, before
// the gateway serves.
func (a *auditLog) record(w *storeWrites) {
	if w == nil {
		a.stopOnce.Do(func() {}) // nothing sweeps
		return
	}
	a.writes = w
	go a.coalesce.run(a.stopSweeping)
}

// addCoalesced queues e unless its kind's burst is spent: then it is
// counted in the kind's summary entry (auditcoalesce.go).
func (a *auditLog) addCoalesced(kind string, e store.AuditEntry) {
	if a.writes == nil {
		return
	}
	a.coalesce.add(kind, e)
}

// add queues e without ever blocking.
func (a *auditLog) add(e store.AuditEntry) {
	if a.writes == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	a.writes.audit(e)
}

// drop counts and logs a lost entry: what was done and by whom, so the
// log holds what the audit log could not.
func (a *auditLog) drop(e store.AuditEntry, reason string, err error) {
	a.dropped.WithLabelValues(reason).Inc()
	attrs := []any{"reason", reason, "action", e.Action, "machine", e.Machine, "target", e.Target,
		"status", e.Status, "token_id", e.TokenID, "actor", e.Actor, "source", e.Source, "time", e.Time.UTC().Format(time.RFC3339Nano)}
	if err != nil {
		attrs = append(attrs, "err", err.Error())
	}
	a.logger.Warn("audit entry lost", attrs...)
}

// stopCoalescing ends the sweeps and queues every summary still
// pending: the gateway is stopping.
func (a *auditLog) stopCoalescing() {
	a.stopOnce.Do(func() {
		close(a.stopSweeping)
		a.coalesce.flush()
	})
}

// closeAudit flushes the audit log and everything else queued for the
// store: call it once no request can add to it any more (the HTTP server
// has shut down) and before the store closes. While the store does not
// answer it does not wait: what waits goes to the spill file, for the
// next start.
func (g *Gateway) closeAudit(ctx context.Context) error {
	g.audit.stopCoalescing()
	if err := g.writes.close(ctx); err != nil {
		return fmt.Errorf("audit log and the fleet's changes: %w", err)
	}
	return nil
}

// who names the holder of a dashboard or connector credential for an
// entry: the token's id and note, or the shared secret. A credential that
// does not verify names nobody.
func (g *Gateway) who(credential, role string) (tokenID, actor string) {
	if credential == "" {
		return "", ""
	}
	p, err := g.opts.Auth.Verify(credential, role, "")
	if err != nil {
		return "", ""
	}
	return principalActor(p)
}

// principalActor is who p is in the audit log.
func principalActor(p auth.Principal) (tokenID, actor string) {
	if p.Shared {
		return "", store.SharedSecretActor
	}
	return p.TokenID, p.Note
}

// recordAudit queues an entry for a change made by the request in c,
// naming its dashboard credential's holder and its client address. The
// token routes call it for token-create and token-revoke (machine empty,
// target the token's id).
func (g *Gateway) recordAudit(c echo.Context, action, machine, target string, status int) {
	credential, _ := auth.CredentialFrom(c.Request())
	tokenID, actor := g.who(credential, auth.RoleDashboard)
	markAudited(c)
	g.audit.add(auditEntry(tokenID, actor, c.RealIP(), action, machine, target, status))
}

// auditEntry is an entry with its target cleaned.
func auditEntry(tokenID, actor, source, action, machine, target string, status int) store.AuditEntry {
	return store.AuditEntry{TokenID: tokenID, Actor: actor, Source: source,
		Action: action, Machine: machine, Target: cleanTarget(target), Status: status}
}

// cleanTarget bounds a target and keeps a credential out of it: a client
// may put anything in a path segment, and the store refuses a JWT.
func cleanTarget(s string) string {
	if i := strings.Index(s, "eyJ"); i >= 0 && strings.Count(s[i:], ".") >= 2 {
		return "[redacted]"
	}
	if len(s) > maxTarget {
		s = strings.ToValidUTF8(s[:maxTarget], "")
	}
	return s
}

// auditProxied records the changes proxied to a connector, after their
// response, with its status. Requests another replica forwarded here are
// recorded there, not twice.
func (g *Gateway) auditProxied(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		// Reads, most of the traffic, cost one comparison here.
		if g.writes == nil || isSafe(r.Method) || r.Header.Get(cluster.HopHeader) != "" {
			return next(c)
		}
		name := c.Param("name")
		action, target, read := proxiedAction(r.Method, connectorPath(r.URL.Path, name))
		if action == "" {
			return next(c)
		}
		var capture *captureWriter
		if read {
			capture = &captureWriter{ResponseWriter: c.Response().Writer}
			c.Response().Writer = capture
		}
		var err error
		// Deferred: the relay aborts a response that breaks mid-body
		// with a panic (http.ErrAbortHandler); the change may have been
		// made all the same.
		defer func() {
			status := c.Response().Status
			if err != nil {
				status = errorStatus(err)
			}
			if capture != nil {
				target = withAnswer(action, target, capture.buf.Bytes(), c.Response().Header())
			}
			g.recordAudit(c, action, name, target, status)
		}()
		err = next(c)
		return err
	}
}

// errorStatus is the status an error returned by a handler is answered
// with.
func errorStatus(err error) int {
	if he, ok := err.(*echo.HTTPError); ok {
		return he.Code
	}
	return http.StatusInternalServerError
}

// connectorPath is a proxied request's path on the connector, without
// "/api": /api/clients/<name>/threads/x → threads/x.
func connectorPath(path, name string) string {
	if n, rest, ok := splitProxied(path); ok && n == name {
		return strings.Trim(rest, "/")
	}
	return strings.Trim(path, "/")
}

// proxiedAction names the change a proxied request makes ("" for none),
// its target as far as the request tells it, and whether the response is
// needed to complete the target.
func proxiedAction(method, path string) (action, target string, readAnswer bool) {
	if isSafe(method) {
		return "", "", false
	}
	seg := strings.Split(path, "/")
	switch {
	case method == http.MethodPost && len(seg) == 1 && seg[0] == "threads":
		return ActionStart, "", true
	case method == http.MethodPost && len(seg) == 3 && seg[0] == "threads":
		switch seg[2] {
		case ActionKill, ActionPause, ActionResume, ActionAnswer:
			return seg[2], seg[1], false
		case ActionFork:
			return ActionFork, seg[1], true
		}
	case method == http.MethodPost && len(seg) == 3 && seg[0] == "workflows" && seg[2] == "rollback":
		return ActionRollback, seg[1], true
	case method == http.MethodDelete && len(seg) == 2 && seg[0] == "cas":
		return ActionCASDelete, seg[1], false
	case method == http.MethodPost && len(seg) == 2 && seg[0] == "cas" && seg[1] == "gc":
		return ActionGC, "", false
	case method == http.MethodPost && len(seg) == 1 && seg[0] == "cas":
		return ActionCASPut, "", true
	}
	return ActionOther, method + " /api/" + path, false
}

// isSafe says whether a method only reads (RFC 9110's safe methods).
func isSafe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// withAnswer completes a target from the connector's answer: the new
// thread of a start or fork, the version a rollback made current, the
// hash a put stored. An answer that is not the expected JSON leaves the
// target as it is.
func withAnswer(action, target string, body []byte, h http.Header) string {
	if h.Get("Content-Encoding") != "" {
		return target
	}
	var answer struct {
		ThreadID string `json:"threadId"`
		Hash     string `json:"hash"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &answer) != nil {
		return target
	}
	switch {
	case action == ActionStart && answer.ThreadID != "":
		return answer.ThreadID
	case action == ActionFork && answer.ThreadID != "":
		return target + " -> " + answer.ThreadID
	case action == ActionRollback && answer.Hash != "":
		return target + "@" + answer.Hash
	case action == ActionCASPut && answer.Hash != "":
		return answer.Hash
	}
	return target
}

// captureWriter keeps the first captureLimit bytes of a response on their
// way to the client.
type captureWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if room := captureLimit - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer's Flush.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditLogin records a login with its status, naming the token logged in
// with (read back from the session cookie the login sets; a refused one
// names nobody).
func (g *Gateway) auditLogin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.writes == nil {
			return next(c)
		}
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = errorStatus(err)
		}
		var tokenID, actor string
		for _, ck := range (&http.Response{Header: c.Response().Header()}).Cookies() {
			if ck.Name == auth.CookieName && ck.Value != "" {
				tokenID, actor = g.who(ck.Value, auth.RoleDashboard)
			}
		}
		markAudited(c)
		e := store.AuditEntry{TokenID: tokenID, Actor: actor, Source: c.RealIP(), Action: ActionLogin, Status: status}
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			// Anyone may try: refusals are coalesced per address, as
			// every refusal is (auditrefusals.go).
			g.audit.addCoalesced(ActionLogin+"|"+c.RealIP(), e)
			return err
		}
		g.audit.add(e)
		return err
	}
}

// auditLogout records a logout, naming the session's token.
func (g *Gateway) auditLogout(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.writes == nil {
			return next(c)
		}
		credential, _ := auth.CredentialFrom(c.Request())
		tokenID, actor := g.who(credential, auth.RoleDashboard)
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = errorStatus(err)
		}
		markAudited(c)
		e := store.AuditEntry{TokenID: tokenID, Actor: actor, Source: c.RealIP(), Action: ActionLogout, Status: status}
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			g.audit.addCoalesced(ActionLogout+"|"+c.RealIP(), e)
			return err
		}
		g.audit.add(e)
		return err
	}
}

// auditEntryJSON is one entry of GET /api/gateway/audit.
type auditEntryJSON struct {
	ID      int64     `json:"id"`
	Time    time.Time `json:"time"`
	TokenID string    `json:"tokenId"`
	Actor   string    `json:"actor"`
	Source  string    `json:"source"`
	Action  string    `json:"action"`
	Machine string    `json:"machine"`
	Target  string    `json:"target"`
	Status  int       `json:"status"`
}

// auditParams are the query parameters GET /api/gateway/audit knows; key
// is the dashboard's credential for requests that cannot send headers.
var auditParams = map[string]bool{"action": true, "machine": true, "token": true, "since": true, "until": true, "limit": true, "offset": true, "key": true}

// maxTokenIDLen bounds the token filter: ids are 26 characters
// (auth.NewTokenID), imported ones may be longer, none is a document.
const maxTokenIDLen = 128

// listAudit is GET /api/gateway/audit?action=&machine=&token=&since=&until=&limit=&offset=:
// {"entries":[...],"total":N}, newest first. since and until are RFC 3339
// times, limit at most store.MaxLimit (default store.DefaultLimit). A bad
// parameter is answered 400 naming it.
func (g *Gateway) listAudit(c echo.Context) error {
	if g.opts.Store == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "no audit log: this gateway keeps nothing (no --data-dir or --database-url)")
	}
	q, err := parseAuditQuery(c.QueryParams())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	page, err := g.opts.Store.ListAudit(c.Request().Context(), q)
	if err != nil {
		return g.storeUnavailable("audit log not read", err)
	}
	out := struct {
		Entries []auditEntryJSON `json:"entries"`
		Total   int              `json:"total"`
	}{Entries: make([]auditEntryJSON, 0, len(page.Entries)), Total: page.Total}
	for _, e := range page.Entries {
		out.Entries = append(out.Entries, auditEntryJSON{ID: e.ID, Time: e.Time.UTC(), TokenID: e.TokenID, Actor: e.Actor,
			Source: e.Source, Action: e.Action, Machine: e.Machine, Target: e.Target, Status: e.Status})
	}
	return c.JSON(http.StatusOK, out)
}

// queryParams checks that v holds only the parameters known names (listed,
// for the message, in shown), each at most once, and returns the getter of
// their values ("" when absent).
func queryParams(v map[string][]string, known map[string]bool, shown string) (get func(name string) string, err error) {
	for name, vals := range v {
		if !known[name] {
			return nil, fmt.Errorf("unknown parameter %q (known: %s)", name, shown)
		}
		if len(vals) > 1 {
			return nil, fmt.Errorf("%s: given %d times", name, len(vals))
		}
	}
	return func(name string) string {
		if vals := v[name]; len(vals) > 0 {
			return vals[0]
		}
		return ""
	}, nil
}

// pageParams reads a list route's limit (1 to store.MaxLimit; 0 when
// absent, for the store's default) and offset (at least 0).
func pageParams(get func(name string) string) (limit, offset int, err error) {
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxLimit {
			return 0, 0, fmt.Errorf("limit: %q is not a whole number from 1 to %d", s, store.MaxLimit)
		}
		limit = n
	}
	if s := get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("offset: %q is not a whole number of at least 0", s)
		}
		offset = n
	}
	return limit, offset, nil
}

// parseAuditQuery checks GET /api/gateway/audit's parameters; the error
// names the first bad one.
func parseAuditQuery(v map[string][]string) (store.AuditQuery, error) {
	var q store.AuditQuery
	get, err := queryParams(v, auditParams, "action, machine, token, since, until, limit, offset")
	if err != nil {
		return q, err
	}
	if a := get("action"); a != "" {
		if !slices.Contains(auditActions, a) {
			return q, fmt.Errorf("action: unknown action %q (one of %s)", a, strings.Join(auditActions, ", "))
		}
		q.Action = a
	}
	if m := get("machine"); m != "" {
		if !presence.ValidName(m) {
			return q, fmt.Errorf("machine: %q is not a connector name", m)
		}
		q.Machine = m
	}
	if id := get("token"); id != "" {
		// A token's id, never the token: a JWT pasted here would be a
		// credential in a URL, in logs and in the browser's history.
		if len(id) > maxTokenIDLen || strings.ContainsAny(id, ". /") {
			return q, fmt.Errorf("token: %q is not a token id (the id the audit log shows, not the token itself)", id)
		}
		q.TokenID = id
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := get(p.name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, fmt.Errorf("%s: %q is not an RFC 3339 time (such as 2026-01-02T15:04:05Z)", p.name, s)
			}
			*p.to = t
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return q, fmt.Errorf("until: %s is not after since", get("until"))
	}
	q.Limit, q.Offset, err = pageParams(get)
	return q, err
}
