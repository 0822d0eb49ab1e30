package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/version"
)

// Webhooks about threads (Options.Notify, gateway/notify): the store adds
// a notification in the transaction that stores a thread's new status
// (the fleet's writes, storewrites.go), the batch's writer wakes the
// sender, and the sender — on every replica, claiming from the shared
// database so one sends each — posts it and records the outcome.
// GET /api/gateway/notifications lists them for the dashboard.

// notifier is the running sender.
type notifier struct {
	snd    *notify.Sender
	cancel context.CancelFunc
	done   chan struct{}
}

// newNotifier gives the store the receivers and starts the sender; nil
// when no receiver is configured, or there is no store to keep
// notifications in.
func (g *Gateway) newNotifier() *notifier {
	cfg := g.opts.Notify
	if cfg == nil || len(cfg.Targets) == 0 {
		return nil
	}
	if g.opts.Store == nil {
		g.opts.Logger.Warn("notifications: no store to keep them in (no --data-dir or --database-url): none are sent")
		return nil
	}
	if err := g.opts.Store.SetNotify(cfg.Settings()); err != nil {
		g.opts.Logger.Error("notifications: not sent", "err", err.Error())
		return nil
	}
	o := notify.Options{Store: g.opts.Store, Config: *cfg, Logger: g.opts.Logger,
		UserAgent: "uncaged-gateway/" + version.Version}
	if g.opts.notifyOptions != nil {
		g.opts.notifyOptions(&o)
	}
	snd := notify.New(o)
	g.metrics.Registry().MustRegister(snd.Collectors()...)
	labels := make([]string, 0, len(cfg.Targets))
	for _, t := range cfg.Targets {
		labels = append(labels, t.Label) // never the URL: it may be a secret
	}
	g.opts.Logger.Info("notifications on", "receivers", labels, "on", cfg.On, "format", string(cfg.Format),
		"signed", len(cfg.Secret) > 0, "public_url", cfg.PublicURL)
	if cfg.PublicURL == "" {
		g.opts.Logger.Warn("notifications carry no dashboard link: no --public-url")
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{snd: snd, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		snd.Run(ctx)
	}()
	return n
}

// wake has the sender look for notifications now. Nil-safe.
func (n *notifier) wake() {
	if n != nil {
		n.snd.Wake()
	}
}

// stop ends the sender and waits for it: attempts under way are cut off
// and left due for the next start. Nil-safe.
func (n *notifier) stop() {
	if n == nil {
		return
	}
	n.cancel()
	<-n.done
}

// notificationJSON is one notification of GET /api/gateway/notifications.
type notificationJSON struct {
	ID        int64      `json:"id"`
	Receiver  string     `json:"receiver"` // scheme and host only
	Machine   string     `json:"machine"`
	Thread    string     `json:"thread"`
	Workflow  string     `json:"workflow"`
	Status    string     `json:"status"`
	UpdatedAt time.Time  `json:"updatedAt"`
	State     string     `json:"state"`
	Attempts  int        `json:"attempts"`
	LastCode  int        `json:"lastCode,omitempty"`
	LastError string     `json:"lastError,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	NextAt    *time.Time `json:"nextAt,omitempty"` // pending only
	Finished  *time.Time `json:"finishedAt,omitempty"`
}

// notificationParams are the query parameters
// GET /api/gateway/notifications knows; key is the dashboard's credential
// for requests that cannot send headers.
var notificationParams = map[string]bool{"state": true, "machine": true, "limit": true, "offset": true, "key": true}

// listNotifications is GET /api/gateway/notifications?state=&machine=&limit=&offset=:
// {"notifications":[...],"total":N,"enabled":bool}, newest first. A bad
// parameter is answered 400 naming it.
func (g *Gateway) listNotifications(c echo.Context) error {
	if g.opts.Store == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "no notifications: this gateway keeps nothing (no --data-dir or --database-url)")
	}
	q, err := parseNotificationQuery(c.QueryParams())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	page, err := g.opts.Store.ListNotifications(c.Request().Context(), q)
	if err != nil {
		return g.storeUnavailable("notifications not read", err)
	}
	out := struct {
		Notifications []notificationJSON `json:"notifications"`
		Total         int                `json:"total"`
		Enabled       bool               `json:"enabled"` // receivers are configured on this replica
	}{Notifications: make([]notificationJSON, 0, len(page.Notifications)), Total: page.Total, Enabled: g.notifier != nil}
	for _, n := range page.Notifications {
		j := notificationJSON{ID: n.ID, Receiver: n.TargetLabel, Machine: n.Machine, Thread: n.Thread, Workflow: n.Workflow,
			Status: n.Status, UpdatedAt: n.UpdatedAt, State: n.State, Attempts: n.Attempts, LastCode: n.LastCode,
			LastError: n.LastError, CreatedAt: n.CreatedAt, Finished: n.FinishedAt}
		if n.State == store.NotifyPending {
			next := n.NextAt
			j.NextAt = &next
		}
		out.Notifications = append(out.Notifications, j)
	}
	return c.JSON(http.StatusOK, out)
}

// parseNotificationQuery checks GET /api/gateway/notifications'
// parameters; the error names the first bad one.
func parseNotificationQuery(v map[string][]string) (store.NotificationQuery, error) {
	var q store.NotificationQuery
	get, err := queryParams(v, notificationParams, "state, machine, limit, offset")
	if err != nil {
		return q, err
	}
	states := []string{store.NotifyPending, store.NotifyDelivered, store.NotifyFailed}
	if s := get("state"); s != "" {
		if !slices.Contains(states, s) {
			return q, fmt.Errorf("state: %q is not pending, delivered or failed", s)
		}
		q.State = s
	}
	if m := get("machine"); m != "" {
		if !presence.ValidName(m) {
			return q, fmt.Errorf("machine: %q is not a connector name", m)
		}
		q.Machine = m
	}
	q.Limit, q.Offset, err = pageParams(get)
	return q, err
}
