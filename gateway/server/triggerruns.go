package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/trigger"
)

// Runs of triggers reach their machines here. Every replica runs the two
// loops; the store decides who does what, so a cluster does each thing
// once:
//
//   - the scheduler records a run for each schedule's time that has come
//     (its delivery id is the time, so two replicas firing it record one),
//     and for a time missed while no gateway ran, the latest one — or none,
//     when the trigger says --missed skip;
//   - the sender takes the queued runs of the machines connected to this
//     replica, in order, under a lease no other replica's sender can take,
//     and asks each machine's connector to start the thread, with the
//     run's id as the request's Idempotency-Key: a run sent again after a
//     crash, by whichever replica, returns the thread the first sending
//     started. A run is started only when the connector answers with a
//     thread id; a machine that does not answer keeps its runs queued, in
//     order, until it does or they expire.

const (
	// runLease is how long a sender holds the runs it claimed: far longer
	// than a start takes, short enough that a crashed replica's runs go
	// to another soon after.
	runLease = time.Minute
	// runBatch is how many runs of one machine are claimed at a time.
	runBatch = 8
	// runStartTimeout bounds one start request through the tunnel.
	runStartTimeout = 30 * time.Second
	// triggerPoll is how often both loops look without being woken: for
	// what another replica or the CLI changed in the store.
	triggerPoll = 5 * time.Second
	// skipGrace is how late a schedule's time may be run under
	// --missed skip: a time passed longer ago was missed (a gateway that
	// runs wakes for each time within milliseconds).
	skipGrace = 30 * time.Second
)

// triggerMetrics are the triggers' counters.
type triggerMetrics struct {
	runs              *prometheus.CounterVec // trigger, outcome
	signatureFailures *prometheus.CounterVec // reason
	queue             *prometheus.GaugeVec   // state
}

func newTriggerMetrics() triggerMetrics {
	return triggerMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uncaged_gateway_trigger_runs_total",
			Help: "Runs of triggers by outcome: queued, duplicate (a delivery seen before), started, failed, expired, refused (a prompt that could not be made), rate_limited."},
			[]string{"trigger", "outcome"}),
		signatureFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uncaged_gateway_trigger_signature_failures_total",
			Help: "Webhook deliveries refused for their signature: missing, bad, or rate_limited (an address that sent too many bad ones)."},
			[]string{"reason"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "uncaged_gateway_trigger_runs",
			Help: "Runs in the store by state (queued runs wait for their machine), as this replica last counted them."},
			[]string{"state"}),
	}
}

// triggerLoops are a gateway's scheduler and sender. Nil without a store;
// every method is nil-safe.
type triggerLoops struct {
	g       *Gateway
	st      store.Store
	owner   string
	now     func() time.Time
	metrics triggerMetrics
	// perTrigger bounds each trigger's deliveries, badSignatures each
	// address's refused ones (triggers.go).
	perTrigger, badSignatures *rateLimiter

	senderWake, schedulerWake chan struct{}
	cancel                    context.CancelFunc
	done                      sync.WaitGroup
	// unparsable remembers the schedules already reported as unreadable.
	unparsable map[string]bool
}

// newTriggerLoops starts the loops; nil without a store.
func (g *Gateway) newTriggerLoops() *triggerLoops {
	if g.opts.Store == nil {
		return nil
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	tl := &triggerLoops{g: g, st: g.opts.Store, owner: "gateway-" + hex.EncodeToString(b), now: time.Now, metrics: newTriggerMetrics(),
		perTrigger: newRateLimiter(hookPerMinute, hookBurst), badSignatures: newRateLimiter(badSignaturePerMinute, badSignatureBurst),
		senderWake: make(chan struct{}, 1), schedulerWake: make(chan struct{}, 1), unparsable: map[string]bool{}}
	if g.opts.triggerClock != nil {
		tl.now = g.opts.triggerClock
	}
	g.metrics.Registry().MustRegister(tl.metrics.runs, tl.metrics.signatureFailures, tl.metrics.queue)
	// A machine that comes online here gets its queued runs at once.
	prev := g.presence.OnChange
	g.presence.OnChange = func(name, status string) {
		if prev != nil {
			prev(name, status)
		}
		if status == presence.Online {
			tl.wakeSender()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	tl.cancel = cancel
	tl.watch(ctx)
	tl.done.Add(2)
	go func() { defer tl.done.Done(); tl.loop(ctx, tl.senderWake, tl.send) }()
	go func() { defer tl.done.Done(); tl.loop(ctx, tl.schedulerWake, tl.schedule) }()
	return tl
}

// watch wakes the loops on what another replica, or a trigger command,
// changed in the store: a run queued for a machine connected here is sent
// at once, a trigger made or resumed elsewhere is looked at at once.
// Without notifications the loops still look every triggerPoll.
func (tl *triggerLoops) watch(ctx context.Context) {
	changes, err := tl.st.Subscribe(ctx)
	if err != nil {
		tl.g.opts.Logger.Warn("triggers: no notifications from the store; changes made elsewhere are seen within seconds", "err", err.Error())
		return
	}
	tl.done.Add(1)
	go func() {
		defer tl.done.Done()
		for c := range changes {
			switch c.Kind {
			case store.ChangeRun:
				for _, machine := range c.IDs {
					if _, online, _ := tl.g.presence.Get(machine); online {
						tl.wakeSender()
						break
					}
				}
			case store.ChangeTrigger, store.ChangeReload:
				tl.wakeScheduler()
				tl.wakeSender()
			}
		}
	}()
}

// stop ends both loops and waits for them: a start under way is cut off
// and its run, still claimed, goes back to the queue when its lease
// lapses.
func (tl *triggerLoops) stop() {
	if tl == nil {
		return
	}
	tl.cancel()
	tl.done.Wait()
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// triggerNow is the triggers' clock.
func (g *Gateway) triggerNow() time.Time {
	if g.triggers != nil {
		return g.triggers.now()
	}
	return g.now()
}

// wakeSender has the sender look for queued runs now.
func (tl *triggerLoops) wakeSender() {
	if tl != nil {
		wake(tl.senderWake)
	}
}

// wakeScheduler has the scheduler look at the schedules now.
func (tl *triggerLoops) wakeScheduler() {
	if tl != nil {
		wake(tl.schedulerWake)
	}
}

// loop runs pass at once, then whenever woken, and at the latest when
// pass says (or triggerPoll).
func (tl *triggerLoops) loop(ctx context.Context, woken chan struct{}, pass func(context.Context) time.Duration) {
	for {
		wait := min(pass(ctx), triggerPoll)
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-woken:
			t.Stop()
		case <-t.C:
		}
	}
}

// send is one pass of the sender: expire what waited too long, count the
// queue, then start the queued runs of every machine connected here.
func (tl *triggerLoops) send(ctx context.Context) time.Duration {
	log := tl.g.opts.Logger
	if n, err := tl.st.ExpireRuns(ctx, tl.now()); err != nil {
		tl.g.storeFailed("expiring trigger runs", err)
		return triggerPoll
	} else if n > 0 {
		log.Info("trigger runs expired: their machines did not come back in time", "runs", n)
		tl.metrics.runs.WithLabelValues("", "expired").Add(float64(n))
	}
	if counts, err := tl.st.CountRuns(ctx); err == nil {
		for _, s := range []store.RunState{store.RunQueued, store.RunSending, store.RunStarted, store.RunExpired, store.RunFailed} {
			tl.metrics.queue.WithLabelValues(string(s)).Set(float64(counts[s]))
		}
	}
	machines, err := tl.st.QueuedMachines(ctx)
	if err != nil {
		tl.g.storeFailed("reading the queued trigger runs", err)
		return triggerPoll
	}
	for _, m := range machines {
		conn, online, _ := tl.g.presence.Get(m)
		if !online || conn == nil {
			continue // another replica's, or away
		}
		tl.sendMachine(ctx, m, conn)
	}
	return triggerPoll
}

// sendMachine starts machine's queued runs in order, until none is left
// or one cannot be delivered now (which, with those after it, goes back
// to the queue).
func (tl *triggerLoops) sendMachine(ctx context.Context, machine string, conn presence.Conn) {
	for ctx.Err() == nil {
		runs, err := tl.st.ClaimRuns(ctx, machine, tl.owner, runLease, runBatch)
		if err != nil {
			tl.g.storeFailed("claiming trigger runs", err)
			return
		}
		if len(runs) == 0 {
			return
		}
		for i, r := range runs {
			res := tl.start(ctx, conn, r)
			tl.finish(ctx, r, res)
			if res.State == store.RunQueued {
				for _, rest := range runs[i+1:] {
					tl.finish(ctx, rest, store.RunResult{ID: rest.ID, Owner: tl.owner, State: store.RunQueued})
				}
				return
			}
		}
	}
}

// finish records a run's outcome, counts it and, for a started one,
// audits it.
func (tl *triggerLoops) finish(ctx context.Context, r store.TriggerRun, res store.RunResult) {
	// The outcome is recorded even when the gateway is stopping: the
	// thread exists, and a lapsed lease would only send it again (to the
	// same thread, by its key).
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := tl.st.FinishRun(wctx, res); err != nil && !errors.Is(err, store.ErrNotFound) {
		tl.g.storeFailed("recording a trigger run", err)
	}
	log := tl.g.opts.Logger
	switch res.State {
	case store.RunStarted:
		tl.metrics.runs.WithLabelValues(r.TriggerID, "started").Inc()
		tl.g.audit.add(auditEntry("", "trigger "+r.TriggerID, "", ActionTriggerRun, r.Machine, res.ThreadID, http.StatusCreated))
		log.Info("trigger run started", "trigger", r.TriggerID, "run", r.ID, "machine", r.Machine, "thread", res.ThreadID)
	case store.RunFailed:
		tl.metrics.runs.WithLabelValues(r.TriggerID, "failed").Inc()
		log.Warn("trigger run failed", "trigger", r.TriggerID, "run", r.ID, "machine", r.Machine, "err", res.Error)
	case store.RunQueued:
		if res.Error != "" {
			log.Info("trigger run waits", "trigger", r.TriggerID, "run", r.ID, "machine", r.Machine, "why", res.Error)
		}
	}
}

// start asks the machine's connector to start r's thread.
func (tl *triggerLoops) start(ctx context.Context, conn presence.Conn, r store.TriggerRun) store.RunResult {
	res := store.RunResult{ID: r.ID, Owner: tl.owner}
	body, _ := json.Marshal(map[string]string{"workflow": r.Workflow, "prompt": r.Prompt}) // strings only: cannot fail
	ctx, cancel := context.WithTimeout(ctx, runStartTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://connector/api/threads", bytes.NewReader(body))
	if err != nil {
		res.State, res.Error = store.RunFailed, err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", r.ID)
	resp, err := conn.RoundTrip(req)
	if err != nil {
		res.State, res.Error = store.RunQueued, "the machine did not answer: "+err.Error()
		return res
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var out struct {
		ThreadID string `json:"threadId"`
		Error    string `json:"error"`
	}
	_ = json.Unmarshal(answer, &out) // a body that is not JSON leaves both empty
	switch {
	case (resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK) && out.ThreadID != "":
		res.State, res.ThreadID = store.RunStarted, out.ThreadID
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		res.State, res.Error = store.RunQueued, fmt.Sprintf("the machine answered %d: %s", resp.StatusCode, cmp.Or(out.Error, http.StatusText(resp.StatusCode)))
	default:
		res.State, res.Error = store.RunFailed, fmt.Sprintf("the machine refused it (%d): %s", resp.StatusCode, cmp.Or(out.Error, http.StatusText(resp.StatusCode)))
	}
	return res
}

// schedule is one pass of the scheduler: a run for every schedule whose
// time has come; it returns how long until the next one.
func (tl *triggerLoops) schedule(ctx context.Context) time.Duration {
	list, err := tl.st.ListTriggers(ctx)
	if err != nil {
		tl.g.storeFailed("reading the triggers", err)
		return triggerPoll
	}
	now := tl.now()
	next := now.Add(triggerPoll)
	for _, t := range list {
		if t.Kind != store.TriggerSchedule || t.Paused {
			continue
		}
		s, err := trigger.ParseSchedule(t.Schedule, t.TimeZone)
		if err != nil {
			if !tl.unparsable[t.ID] {
				tl.unparsable[t.ID] = true
				tl.g.opts.Logger.Error("a trigger's schedule cannot be read: it does not fire", "trigger", t.ID, "err", err.Error())
			}
			continue
		}
		from := t.CreatedAt
		if t.LastFired != nil && t.LastFired.After(from) {
			from = *t.LastFired
		}
		if at, ok := s.Latest(from, now); ok && (t.Missed != store.MissedSkip || now.Sub(at) <= skipGrace) {
			tl.fire(ctx, t, at)
			from = at
		}
		if n := s.Next(maxTime(from, now)); !n.IsZero() && n.Before(next) {
			next = n
		}
	}
	return next.Sub(tl.now())
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fire records the run of t for its time at.
func (tl *triggerLoops) fire(ctx context.Context, t store.Trigger, at time.Time) {
	prompt, err := trigger.SchedulePrompt(t, at)
	if err != nil { // New checked it; a trigger stored otherwise does not fire
		if !tl.unparsable[t.ID] {
			tl.unparsable[t.ID] = true
			tl.metrics.runs.WithLabelValues(t.ID, "refused").Inc()
			tl.g.opts.Logger.Error("a schedule's prompt cannot be made: it does not fire", "trigger", t.ID, "err", err.Error())
		}
		return
	}
	at = at.UTC()
	_, added, err := tl.st.AddRun(ctx, store.TriggerRun{TriggerID: t.ID, Prompt: prompt, DeliveryID: trigger.ScheduleDeliveryID(at), ScheduledFor: &at})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) { // removed meanwhile
			tl.g.storeFailed("recording a schedule's run", err)
		}
		return
	}
	if added {
		tl.metrics.runs.WithLabelValues(t.ID, "queued").Inc()
		tl.g.opts.Logger.Info("schedule fired", "trigger", t.ID, "for", at.Format(time.RFC3339), "machine", t.Machine)
		tl.wakeSender()
	}
}
