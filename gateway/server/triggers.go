package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/trigger"
)

// Triggers start threads by themselves (issue 30): a webhook
// (POST /hooks/<id>, signed) or a cron schedule names a machine and a
// workflow, and each firing is a run kept in the store. The routes:
//
//	GET    /api/gateway/triggers                every trigger, its next time and recent runs (no secrets)
//	POST   /api/gateway/triggers                create one: {machine, workflow, webhook|schedule, ...}; a webhook's secret is shown once
//	DELETE /api/gateway/triggers/:id            remove it and its runs
//	POST   /api/gateway/triggers/:id/pause      stop it firing (queued runs wait)
//	POST   /api/gateway/triggers/:id/resume
//	POST   /api/gateway/triggers/:id/secret     a webhook's new secret, shown once; the old one accepted for {keepPrevious} (24h)
//	GET    /api/gateway/triggers/:id/runs       its runs, newest first (?state=&limit=&offset=)
//	POST   /hooks/:id                           a webhook's delivery: 202 {runId}
//
// The changes are audited (trigger-create, trigger-delete, trigger-pause,
// trigger-resume, trigger-rotate-secret); a run a trigger started is audited as trigger-run by
// the replica that sent it (triggerruns.go).

// Audit actions of triggers.
const (
	ActionTriggerCreate = "trigger-create"
	ActionTriggerDelete = "trigger-delete"
	ActionTriggerPause  = "trigger-pause"
	ActionTriggerResume = "trigger-resume"
	// ActionTriggerRotateSecret is a webhook given a new secret.
	ActionTriggerRotateSecret = "trigger-rotate-secret"
	// ActionTriggerRun is a thread a trigger started; its target is the
	// thread, its actor the trigger.
	ActionTriggerRun = "trigger-run"
)

// Bounds of the webhook endpoint.
const (
	// hookMaxBody bounds a delivery's body (GitHub's payloads are capped
	// at 25 MB, but those that start work are a few KiB).
	hookMaxBody = 1 << 20
	// hookPerMinute and hookBurst bound the deliveries one trigger takes;
	// badSignaturePerMinute and badSignatureBurst the refusals one client
	// address gets before it is answered 429 without being looked at.
	hookPerMinute, hookBurst                 = 60, 30
	badSignaturePerMinute, badSignatureBurst = 10, 20
	// recentRuns is how many runs the trigger list shows with each.
	recentRuns = 5
)

// TriggerJSON is one trigger as the API shows it: never its secret.
type TriggerJSON struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Machine   string  `json:"machine"`
	Workflow  string  `json:"workflow"`
	Prompt    string  `json:"prompt,omitempty"`
	Note      string  `json:"note,omitempty"`
	URL       string  `json:"url,omitempty"` // a webhook's
	Schedule  string  `json:"schedule,omitempty"`
	TimeZone  string  `json:"timezone,omitempty"`
	Missed    string  `json:"missed,omitempty"`
	NextAt    *string `json:"nextAt,omitempty"` // a schedule's next time, unless paused
	LastFired *string `json:"lastFired,omitempty"`
	Expire    string  `json:"expire"`
	Paused    bool    `json:"paused"`
	CreatedAt string  `json:"createdAt"`
	CreatedBy string  `json:"createdBy,omitempty"`
	// PreviousSecretUntil is, while a webhook's replaced secret is still
	// accepted beside its new one, until when.
	PreviousSecretUntil *string `json:"previousSecretUntil,omitempty"`
	// Runs are the most recent runs, newest first (the list only).
	Runs []RunJSON `json:"runs,omitempty"`
}

// RunJSON is one run of a trigger.
type RunJSON struct {
	ID           string  `json:"id"`
	Trigger      string  `json:"trigger"`
	Machine      string  `json:"machine"`
	Workflow     string  `json:"workflow"`
	State        string  `json:"state"`
	ThreadID     string  `json:"threadId,omitempty"`
	Error        string  `json:"error,omitempty"`
	DeliveryID   string  `json:"deliveryId,omitempty"`
	ScheduledFor *string `json:"scheduledFor,omitempty"`
	Attempts     int     `json:"attempts"`
	CreatedAt    string  `json:"createdAt"`
	UpdatedAt    string  `json:"updatedAt"`
	ExpiresAt    string  `json:"expiresAt"`
}

func (g *Gateway) triggerJSON(c echo.Context, t store.Trigger) TriggerJSON {
	j := TriggerJSON{ID: t.ID, Kind: string(t.Kind), Machine: t.Machine, Workflow: t.Workflow, Prompt: t.Prompt, Note: t.Note,
		Schedule: t.Schedule, TimeZone: t.TimeZone, Missed: string(t.Missed), Expire: t.Expire.String(), Paused: t.Paused,
		CreatedAt: isoTime(t.CreatedAt), CreatedBy: t.CreatedBy}
	if t.Kind == store.TriggerWebhook {
		j.URL = g.hookURL(c, t.ID)
		if trigger.PreviousAccepted(t, g.triggerNow()) {
			j.PreviousSecretUntil = isoTimePtr(*t.PreviousUntil)
		}
	}
	if t.LastFired != nil {
		j.LastFired = isoTimePtr(*t.LastFired)
	}
	if t.Kind == store.TriggerSchedule && !t.Paused {
		if s, err := trigger.ParseSchedule(t.Schedule, t.TimeZone); err == nil {
			j.NextAt = isoTimePtr(s.Next(g.triggerNow()))
		}
	}
	return j
}

func runJSON(r store.TriggerRun) RunJSON {
	j := RunJSON{ID: r.ID, Trigger: r.TriggerID, Machine: r.Machine, Workflow: r.Workflow, State: string(r.State),
		ThreadID: r.ThreadID, Error: r.Error, DeliveryID: r.DeliveryID, Attempts: r.Attempts,
		CreatedAt: isoTime(r.CreatedAt), UpdatedAt: isoTime(r.UpdatedAt), ExpiresAt: isoTime(r.ExpiresAt)}
	if r.ScheduledFor != nil {
		j.ScheduledFor = isoTimePtr(*r.ScheduledFor)
	}
	return j
}

// hookURL is where a webhook is delivered: under the public URL when
// one is given, else under the address the request came to.
func (g *Gateway) hookURL(c echo.Context, id string) string {
	if u := g.opts.PublicURL; u != "" {
		return strings.TrimSuffix(u, "/") + "/hooks/" + id
	}
	scheme := "http"
	if trustedProxies(g.opts.TrustedProxies).isHTTPS(c.Request()) {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host + "/hooks/" + id
}

// triggerStore is the store the trigger routes need, or the 503 that
// says there is none.
func (g *Gateway) triggerStore() (store.Store, error) {
	if g.opts.Store == nil {
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, "no triggers: this gateway keeps nothing (no --data-dir or --database-url)")
	}
	return g.opts.Store, nil
}

// listTriggers is GET /api/gateway/triggers: {"triggers": [...]}, oldest
// first, each with its recent runs.
func (g *Gateway) listTriggers(c echo.Context) error {
	st, err := g.triggerStore()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	list, err := st.ListTriggers(ctx)
	if err != nil {
		return g.storeUnavailable("reading the triggers", err)
	}
	out := struct {
		Triggers []TriggerJSON `json:"triggers"`
	}{Triggers: make([]TriggerJSON, 0, len(list))}
	for _, t := range list {
		j := g.triggerJSON(c, t)
		page, err := st.ListRuns(ctx, store.RunQuery{TriggerID: t.ID, Limit: recentRuns})
		if err != nil {
			return g.storeUnavailable("reading the triggers' runs", err)
		}
		for _, r := range page.Runs {
			j.Runs = append(j.Runs, runJSON(r))
		}
		out.Triggers = append(out.Triggers, j)
	}
	return c.JSON(http.StatusOK, out)
}

// triggerRequest is POST /api/gateway/triggers' body.
type triggerRequest struct {
	Machine  string `json:"machine"`
	Workflow string `json:"workflow"`
	Webhook  bool   `json:"webhook"`
	Schedule string `json:"schedule"`
	TimeZone string `json:"timezone"`
	Prompt   string `json:"prompt"`
	Note     string `json:"note"`
	Missed   string `json:"missed"`
	Expire   string `json:"expire"` // a Go duration: "24h", "90m"
}

// createTrigger is POST /api/gateway/triggers: 201 {trigger, url, secret}
// — the secret only now, never again.
func (g *Gateway) createTrigger(c echo.Context) error {
	st, err := g.triggerStore()
	if err != nil {
		return err
	}
	var req triggerRequest
	if err := decodeStrict(c.Request().Body, 64<<10, &req); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "body: "+err.Error())
	}
	spec := trigger.Spec{Machine: req.Machine, Workflow: req.Workflow, Webhook: req.Webhook, Schedule: req.Schedule,
		TimeZone: req.TimeZone, Prompt: req.Prompt, Note: req.Note, Missed: store.MissedPolicy(req.Missed)}
	if req.Expire != "" {
		d, err := time.ParseDuration(req.Expire)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("expire: %q is not a duration such as 24h", req.Expire))
		}
		spec.Expire = d
	}
	credential, _ := auth.CredentialFrom(c.Request())
	tokenID, actor := g.who(credential, auth.RoleDashboard)
	spec.CreatedBy = cmp.Or(actor, tokenID, "dashboard")
	t, err := trigger.New(spec, g.triggerNow())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if err := st.CreateTrigger(c.Request().Context(), t); err != nil {
		return g.storeUnavailable("creating the trigger", err)
	}
	g.recordAudit(c, ActionTriggerCreate, t.Machine, t.ID, http.StatusCreated)
	g.triggers.wakeScheduler()
	out := struct {
		Trigger TriggerJSON `json:"trigger"`
		URL     string      `json:"url,omitempty"`
		Secret  string      `json:"secret,omitempty"`
	}{Trigger: g.triggerJSON(c, t), Secret: t.Secret}
	out.URL = out.Trigger.URL
	return c.JSON(http.StatusCreated, out)
}

// decodeStrict reads one JSON object of at most limit bytes into v,
// refusing unknown fields and anything after it.
func decodeStrict(r io.Reader, limit int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("larger than %d bytes", limit)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// deleteTrigger is DELETE /api/gateway/triggers/:id.
func (g *Gateway) deleteTrigger(c echo.Context) error {
	st, err := g.triggerStore()
	if err != nil {
		return err
	}
	id := c.Param("id")
	t, err := st.GetTrigger(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, "no trigger "+cleanTarget(id))
	}
	if err != nil {
		return g.storeUnavailable("reading the trigger", err)
	}
	if err := st.DeleteTrigger(c.Request().Context(), id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return g.storeUnavailable("removing the trigger", err)
	}
	g.recordAudit(c, ActionTriggerDelete, t.Machine, id, http.StatusOK)
	return c.JSON(http.StatusOK, map[string]string{"removed": id})
}

// rotateSecret is POST /api/gateway/triggers/:id/secret, {"keepPrevious":
// "24h"} (optional; "0s" ends the old secret at once, for one that
// leaked): 200 {trigger, secret} — the new secret only now, never again.
// The webhook's old secret stays accepted for keepPrevious, so that its
// sender can be given the new one without a delivery refused.
func (g *Gateway) rotateSecret(c echo.Context) error {
	st, err := g.triggerStore()
	if err != nil {
		return err
	}
	var req struct {
		KeepPrevious *string `json:"keepPrevious"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeStrict(c.Request().Body, 4<<10, &req); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "body: "+err.Error())
		}
	}
	keep := trigger.DefaultKeepPrevious
	if req.KeepPrevious != nil {
		if keep, err = time.ParseDuration(*req.KeepPrevious); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("keepPrevious: %q is not a duration such as 24h", *req.KeepPrevious))
		}
	}
	until, err := trigger.PreviousUntil(keep, g.triggerNow())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "keepPrevious: "+err.Error())
	}
	id := c.Param("id")
	t, err := st.RotateTriggerSecret(c.Request().Context(), id, trigger.NewSecret(), until)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound, "no trigger "+cleanTarget(id))
	case errors.Is(err, store.ErrInvalid):
		return echo.NewHTTPError(http.StatusBadRequest, "trigger "+cleanTarget(id)+" is a schedule: only a webhook has a secret")
	case err != nil:
		return g.storeUnavailable("changing the trigger's secret", err)
	}
	g.recordAudit(c, ActionTriggerRotateSecret, t.Machine, id, http.StatusOK)
	return c.JSON(http.StatusOK, struct {
		Trigger TriggerJSON `json:"trigger"`
		Secret  string      `json:"secret"`
	}{g.triggerJSON(c, t), t.Secret})
}

// pauseTrigger is POST /api/gateway/triggers/:id/pause and /resume.
func (g *Gateway) pauseTrigger(paused bool) echo.HandlerFunc {
	action := ActionTriggerResume
	if paused {
		action = ActionTriggerPause
	}
	return func(c echo.Context) error {
		st, err := g.triggerStore()
		if err != nil {
			return err
		}
		id := c.Param("id")
		t, err := st.SetTriggerPaused(c.Request().Context(), id, paused)
		if errors.Is(err, store.ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, "no trigger "+cleanTarget(id))
		}
		if err != nil {
			return g.storeUnavailable("changing the trigger", err)
		}
		g.recordAudit(c, action, t.Machine, id, http.StatusOK)
		g.triggers.wakeScheduler()
		g.triggers.wakeSender()
		return c.JSON(http.StatusOK, map[string]TriggerJSON{"trigger": g.triggerJSON(c, t)})
	}
}

// runParams are the query parameters of GET …/triggers/:id/runs.
var runParams = map[string]bool{"state": true, "limit": true, "offset": true, "key": true}

// listRuns is GET /api/gateway/triggers/:id/runs.
func (g *Gateway) listRuns(c echo.Context) error {
	st, err := g.triggerStore()
	if err != nil {
		return err
	}
	get, err := queryParams(c.QueryParams(), runParams, "state, limit, offset")
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	q := store.RunQuery{TriggerID: c.Param("id"), State: store.RunState(get("state"))}
	switch q.State {
	case "", store.RunQueued, store.RunSending, store.RunStarted, store.RunExpired, store.RunFailed:
	default:
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("state: %q is not queued, sending, started, expired or failed", q.State))
	}
	if q.Limit, q.Offset, err = pageParams(get); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if _, err := st.GetTrigger(c.Request().Context(), q.TriggerID); errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, "no trigger "+cleanTarget(q.TriggerID))
	} else if err != nil {
		return g.storeUnavailable("reading the trigger", err)
	}
	page, err := st.ListRuns(c.Request().Context(), q)
	if err != nil {
		return g.storeUnavailable("reading the runs", err)
	}
	out := struct {
		Runs  []RunJSON `json:"runs"`
		Total int       `json:"total"`
	}{Runs: make([]RunJSON, 0, len(page.Runs)), Total: page.Total}
	for _, r := range page.Runs {
		out.Runs = append(out.Runs, runJSON(r))
	}
	return c.JSON(http.StatusOK, out)
}

// hook is POST /hooks/:id, a webhook's delivery. In order: the trigger,
// the sender's record of bad signatures for it, the body's size, the
// signature, the trigger's rate, paused, the delivery id, the prompt; only
// then is a run recorded (once per delivery id) and 202 {runId}
// answered. A refusal starts nothing.
//
// Only what a sender can prove spends what others need: bad signatures
// count against the address for that trigger alone (senders such as
// GitHub share addresses, so one misconfigured hook must not block
// another's), guesses at ids against the address, and only signed
// deliveries against the trigger's rate, so knowing a URL is not enough to
// hold its deliveries back.
func (g *Gateway) hook(c echo.Context) error {
	st, err := g.triggerStore()
	if err != nil {
		return err
	}
	tr := g.triggers
	ip := clientKey(c.RealIP())
	id := c.Param("id")
	ctx := c.Request().Context()
	t, err := st.GetTrigger(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.Kind != store.TriggerWebhook) {
		if ok, wait := tr.badSignatures.allow("unknown " + ip); !ok {
			tr.metrics.signatureFailures.WithLabelValues("rate_limited").Inc()
			return tooMany(c, wait, "too many deliveries to unknown webhooks from this address")
		}
		return echo.NewHTTPError(http.StatusNotFound, "no webhook "+cleanTarget(id))
	}
	if err != nil {
		return g.storeUnavailable("reading the trigger", err)
	}
	sender := t.ID + " " + ip
	if ok, wait := tr.badSignatures.peek(sender); !ok {
		tr.metrics.signatureFailures.WithLabelValues("rate_limited").Inc()
		return tooMany(c, wait, "too many deliveries with a bad signature from this address")
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, hookMaxBody+1))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "reading the body: "+err.Error())
	}
	if len(body) > hookMaxBody {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("a delivery's body is at most %d bytes", hookMaxBody))
	}
	if err := trigger.VerifyDelivery(t, g.triggerNow(), c.Request().Header, body); err != nil {
		reason := "bad"
		if errors.Is(err, trigger.ErrNoSignature) {
			reason = "missing"
		}
		tr.metrics.signatureFailures.WithLabelValues(reason).Inc()
		tr.badSignatures.allow(sender)
		g.bounds.untrusted.Warn("webhook refused", "trigger", t.ID, "reason", reason, "address", c.RealIP())
		return echo.NewHTTPError(http.StatusUnauthorized, err.Error())
	}
	if ok, wait := tr.perTrigger.allow(t.ID); !ok {
		tr.metrics.runs.WithLabelValues(t.ID, "rate_limited").Inc()
		return tooMany(c, wait, fmt.Sprintf("trigger %s takes at most %d deliveries a minute", t.ID, hookPerMinute))
	}
	if t.Paused {
		return echo.NewHTTPError(http.StatusConflict, "trigger "+t.ID+" is paused: `uncaged-gateway trigger resume "+t.ID+"` starts it taking deliveries again")
	}
	delivery, err := trigger.DeliveryID(c.Request().Header)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	prompt, err := trigger.Render(t.Prompt, body)
	if err != nil {
		tr.metrics.runs.WithLabelValues(t.ID, "refused").Inc()
		return echo.NewHTTPError(http.StatusUnprocessableEntity, err.Error())
	}
	run, added, err := st.AddRun(ctx, store.TriggerRun{TriggerID: t.ID, Prompt: prompt, DeliveryID: delivery})
	if errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, "no webhook "+cleanTarget(id))
	}
	if err != nil {
		return g.storeUnavailable("recording the run", err)
	}
	if added {
		tr.metrics.runs.WithLabelValues(t.ID, "queued").Inc()
		tr.wakeSender()
	} else {
		tr.metrics.runs.WithLabelValues(t.ID, "duplicate").Inc()
	}
	return c.JSON(http.StatusAccepted, map[string]any{"runId": run.ID, "state": run.State, "duplicate": !added})
}
