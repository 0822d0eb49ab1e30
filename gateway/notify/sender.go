package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uncaged/workflow/gateway/store"
)

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Second
	DefaultPoll    = 2 * time.Second
	// DefaultLease outlasts a request by far: a claim lapses only when its
	// sender is gone.
	DefaultLease = 2 * time.Minute
	DefaultBatch = 16
)

// Results of an attempt, the label of uncaged_gateway_notifications_total.
const (
	ResultDelivered = "delivered" // the receiver answered 2xx
	ResultRetry     = "retry"     // it failed; tried again later
	ResultFailed    = "failed"    // it failed for the last time, or has no receiver
	ResultLost      = "lost"      // its outcome was not recorded: the claim lapsed, or the store did not answer
)

// Options configure a Sender.
type Options struct {
	// Store keeps the notifications.
	Store store.Notifications
	// Config is what to send and where.
	Config Config
	// Client posts; one that follows no redirect and bounds nothing else
	// if nil (Timeout bounds each request).
	Client *http.Client
	// Timeout bounds one request, answer included (DefaultTimeout).
	Timeout time.Duration
	// Poll is how often the store is asked for due notifications when
	// nothing woke the sender (DefaultPoll): other replicas' notifications
	// and retries are found this way.
	Poll time.Duration
	// Lease is how long a claim is the sender's (DefaultLease).
	Lease time.Duration
	// Batch bounds the notifications claimed, and sent at once, in a round.
	Batch int
	// MaxAttempts and Backoff say how often and when a failed notification
	// is tried again (MaxAttempts, DefaultBackoff); tests shorten them.
	MaxAttempts int
	Backoff     Backoff
	// Owner names this sender's claims (default: drawn).
	Owner string
	// UserAgent is sent with every request.
	UserAgent string
	// Logger tells failures, never a URL but its label.
	Logger *slog.Logger
}

// Sender sends the notifications the store holds.
type Sender struct {
	o       Options
	targets map[string]Target
	wake    chan struct{}

	results *prometheus.CounterVec
	pending atomic.Int64
	oldest  atomic.Int64 // unix nanoseconds of the oldest pending; 0 when none

	logMu       sync.Mutex
	storeLogged time.Time
}

// New makes a Sender; Run runs it.
func New(o Options) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Lease <= 0 {
		o.Lease = max(DefaultLease, 2*o.Timeout)
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = MaxAttempts
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.Owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		o.Owner = hex.EncodeToString(b[:])
	}
	if o.Client == nil {
		o.Client = &http.Client{
			// A receiver's redirect is its failure: following it would post
			// the signed body somewhere nobody configured.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sender{o: o, targets: map[string]Target{}, wake: make(chan struct{}, 1),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_notifications_total", Help: "Notification attempts, by result: delivered, retry, failed (given up), lost (outcome not recorded).",
		}, []string{"result"})}
	for _, t := range o.Config.Targets {
		s.targets[t.Key] = t
	}
	for _, r := range []string{ResultDelivered, ResultRetry, ResultFailed, ResultLost} {
		s.results.WithLabelValues(r)
	}
	return s
}

// Collectors are the sender's metrics: attempts by result, and the
// backlog as last read (in a cluster every replica reads the same one).
func (s *Sender) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		s.results,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "uncaged_gateway_notifications_pending", Help: "Notifications not yet delivered nor given up on (all replicas').",
		}, func() float64 { return float64(s.pending.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "uncaged_gateway_notifications_oldest_pending_seconds", Help: "Age of the oldest pending notification; 0 when none.",
		}, func() float64 {
			o := s.oldest.Load()
			if o == 0 {
				return 0
			}
			return math.Max(0, time.Since(time.Unix(0, o)).Seconds())
		}),
	}
}

// Wake has the sender look for due notifications now: the store has just
// added some.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sends until ctx ends, then waits for the attempts under way, which
// the end cuts off and leaves due again for the next start.
func (s *Sender) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
		full := s.round(ctx)
		if ctx.Err() != nil {
			return
		}
		next := s.o.Poll
		if full {
			next = 0 // more may be due
		}
		t.Reset(next)
	}
}

// round claims what is due and sends it; whether it claimed a full batch.
func (s *Sender) round(ctx context.Context) bool {
	claimed, err := s.o.Store.ClaimNotifications(ctx, s.o.Owner, s.o.Lease, s.o.Batch)
	if err != nil {
		s.storeFailed("notifications: cannot claim due notifications", err)
		return false
	}
	var wg sync.WaitGroup
	for _, n := range claimed {
		wg.Go(func() { s.attempt(ctx, n) })
	}
	wg.Wait()
	if b, err := s.o.Store.NotificationBacklog(ctx); err == nil {
		s.pending.Store(int64(b.Pending))
		if b.Oldest.IsZero() {
			s.oldest.Store(0)
		} else {
			s.oldest.Store(b.Oldest.UnixNano())
		}
	}
	return len(claimed) == s.o.Batch
}

// attempt sends n once and records the outcome.
func (s *Sender) attempt(ctx context.Context, n store.Notification) {
	res := store.NotificationResult{ID: n.ID, Owner: s.o.Owner}
	target, ok := s.targets[n.Target]
	label := target.Label
	if !ok {
		label = n.TargetLabel
	}
	attrs := []any{"delivery", n.ID, "machine", n.Machine, "thread", n.Thread, "status", n.Status, "receiver", label, "attempt", n.Attempts}
	switch {
	case !ok:
		// Configured when it was added, not now: its URL is not known.
		res.Error = "the receiver is no longer configured"
	default:
		res.Code, res.Error = s.post(ctx, target, n)
		res.Delivered = res.Error == ""
	}
	switch {
	case ctx.Err() != nil && !res.Delivered:
		// Cut off by the stop: due again at the next start (or on another
		// replica), without waiting a backoff.
		res.Error, res.RetryAt = "the gateway stopped during the attempt", time.Now()
	case !res.Delivered && ok && n.Attempts < s.o.MaxAttempts:
		res.RetryAt = time.Now().Add(s.o.Backoff(n.Attempts, mrand.Float64()))
	}
	// Recorded even when ctx has ended: what was sent must not be sent again.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.Timeout)
	defer cancel()
	if err := s.o.Store.FinishNotification(fctx, res); err != nil {
		s.results.WithLabelValues(ResultLost).Inc()
		s.o.Logger.Warn("notifications: outcome not recorded; it may be sent again", append(attrs, "delivered", res.Delivered, "err", err.Error())...)
		return
	}
	switch {
	case res.Delivered:
		s.results.WithLabelValues(ResultDelivered).Inc()
		s.o.Logger.Debug("notification delivered", attrs...)
	case !res.RetryAt.IsZero():
		s.results.WithLabelValues(ResultRetry).Inc()
		s.o.Logger.Warn("notification not delivered; will retry", append(attrs, "err", res.Error, "retry_at", res.RetryAt.UTC().Format(time.RFC3339))...)
	default:
		s.results.WithLabelValues(ResultFailed).Inc()
		s.o.Logger.Error("notification given up on", append(attrs, "err", res.Error)...)
	}
}

// maxAnswer bounds what is read of a receiver's answer.
const maxAnswer = 4 << 10

// post sends n to target: the answer's status, and why it failed ("" when
// it did not).
func (s *Sender) post(ctx context.Context, target Target, n store.Notification) (int, string) {
	body, err := Body(s.o.Config.Format, s.o.Config.PublicURL, n)
	if err != nil {
		return 0, "encoding the body: " + err.Error()
	}
	rctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, target.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "building the request: not a valid URL" // the error would quote it
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(EventHeader, Event(n.Status))
	req.Header.Set(DeliveryHeader, strconv.FormatInt(n.ID, 10))
	if s.o.UserAgent != "" {
		req.Header.Set("User-Agent", s.o.UserAgent)
	}
	if len(s.o.Config.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(s.o.Config.Secret, body))
	}
	resp, err := s.o.Client.Do(req)
	if err != nil {
		// url.Error quotes the URL, which may be a secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err.Error()
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer)) // only to quote it
	_ = resp.Body.Close()                                         // read what was needed
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, errorText(resp.StatusCode, answer)
}

// storeFailed logs a store's failure, at most once a minute: the store's
// own outage is reported elsewhere, and a poll every few seconds would
// repeat it.
func (s *Sender) storeFailed(msg string, err error) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if time.Since(s.storeLogged) < time.Minute {
		return
	}
	s.storeLogged = time.Now()
	s.o.Logger.Warn(msg, "err", err.Error())
}
