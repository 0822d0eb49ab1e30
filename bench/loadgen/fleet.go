// Package loadgen is the load and chaos harness's machinery, shared by
// bench/cmd/loadtest and the end-to-end load test: a fleet of simulated
// connectors (real WebSockets carrying the HTTP/2 tunnel, kept up by
// connector/link exactly as `uncaged-workflow connect` does, backoff and
// jitter included), an open-loop request driver through the gateway's
// /api/clients/<name>/..., latency and error statistics, a TCP load
// balancer for cluster runs, and /proc readings of a process's CPU and
// memory.
package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/shared/fleet"
)

// LoadPath is the connector route the driver requests; the gateway path is
// /api/clients/<name>/load.
const LoadPath = "/api/load"

// FleetOptions configure a fleet of simulated connectors.
type FleetOptions struct {
	// Gateway is the base URL the connectors dial (a gateway or a load
	// balancer in front of replicas).
	Gateway string
	// Names are the connectors, one each.
	Names []string
	// Token returns the credential of a connector.
	Token func(name string) string
	// MinBackoff and MaxBackoff, when set, replace link's defaults (1 s,
	// 30 s). Leave them unset to reconnect exactly like the real connector.
	MinBackoff, MaxBackoff time.Duration
	// Version is what the connectors report to the gateway.
	Version string
}

// Fleet is a running set of simulated connectors.
type Fleet struct {
	conns  []*simConnector
	byName map[string]*simConnector
	cancel context.CancelFunc
	wg     sync.WaitGroup
	online atomic.Int64
	// changed is closed and replaced whenever a connector's state changes,
	// so waiters need no polling.
	mu      sync.Mutex
	changed chan struct{}
}

// simConnector is one simulated connector's state as its link reports it.
type simConnector struct {
	name      string
	mu        sync.Mutex
	connected bool
	connects  int       // successful connections so far
	upAt      time.Time // start of the current connection
	downAt    time.Time // end of the last connection
	served    atomic.Int64
}

// StartFleet starts one link per name. Each serves a small deterministic
// API (Handler) and reconnects forever until Stop.
func StartFleet(o FleetOptions) *Fleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{byName: map[string]*simConnector{}, cancel: cancel, changed: make(chan struct{})}
	for _, name := range o.Names {
		c := &simConnector{name: name}
		f.conns = append(f.conns, c)
		f.byName[name] = c
		lo := link.Options{
			Gateway: o.Gateway, Name: name, Token: o.Token(name), Handler: Handler(name, &c.served),
			Version: o.Version, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff,
			OnState: func(state, _ string) { f.onState(c, state) },
		}
		f.wg.Add(1)
		// Run returns nil, once ctx ends: it never gives up on its own.
		go func() { defer f.wg.Done(); _ = link.Run(ctx, lo) }()
	}
	return f
}

func (f *Fleet) onState(c *simConnector, state string) {
	now := time.Now()
	c.mu.Lock()
	switch state {
	case link.StateConnected:
		if !c.connected {
			f.online.Add(1)
		}
		c.connected, c.upAt = true, now
		c.connects++
	case link.StateRetrying, link.StateConnecting:
		if c.connected {
			f.online.Add(-1)
			c.connected, c.downAt = false, now
		}
	}
	c.mu.Unlock()
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Online is how many connectors hold a connection right now.
func (f *Fleet) Online() int { return int(f.online.Load()) }

// Size is how many connectors the fleet has.
func (f *Fleet) Size() int { return len(f.conns) }

// WaitFor waits until cond holds for the fleet or ctx ends; it is checked
// at every state change.
func (f *Fleet) WaitFor(ctx context.Context, cond func(*Fleet) bool) error {
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cond(f) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w (%d of %d connectors online)", ctx.Err(), f.Online(), f.Size())
		}
	}
}

// AllOnline is a WaitFor condition: every connector is connected.
func AllOnline(f *Fleet) bool { return f.Online() == f.Size() }

// ReconnectedSince is a WaitFor condition: every connector has a connection
// that began after t.
func ReconnectedSince(t time.Time) func(*Fleet) bool {
	return func(f *Fleet) bool {
		for _, c := range f.conns {
			c.mu.Lock()
			ok := c.connected && c.upAt.After(t)
			c.mu.Unlock()
			if !ok {
				return false
			}
		}
		return true
	}
}

// ReconnectDelays is, for each connector that reconnected after t, how long
// after t its current connection began, sorted.
func (f *Fleet) ReconnectDelays(t time.Time) []time.Duration {
	var out []time.Duration
	for _, c := range f.conns {
		c.mu.Lock()
		if c.connected && c.upAt.After(t) {
			out = append(out, c.upAt.Sub(t))
		}
		c.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Connects is the total number of successful connections made.
func (f *Fleet) Connects() int {
	n := 0
	for _, c := range f.conns {
		c.mu.Lock()
		n += c.connects
		c.mu.Unlock()
	}
	return n
}

// Served is how many load requests the connectors answered.
func (f *Fleet) Served() int64 {
	var n int64
	for _, c := range f.conns {
		n += c.served.Load()
	}
	return n
}

// Stop ends every link and waits for them.
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
}

// Handler is a simulated connector's API: GET /api/load?seq=N answers
// ExpectedBody(name, N), /api/healthz {"ok":true}, the fleet's change
// stream that of a connector with no threads, anything else 404. It is
// deterministic so the driver can tell a misrouted answer from a right one.
func Handler(name string, served *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case LoadPath:
			served.Add(1)
			fmt.Fprint(w, ExpectedBody(name, r.URL.Query().Get("seq")))
		case "/api/healthz":
			fmt.Fprint(w, `{"ok":true}`)
		case fleet.EventsPath:
			serveIdleChangeStream(w, r)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"not found"}`)
		}
	})
}

// ExpectedBody is what connector name answers to request seq.
func ExpectedBody(name, seq string) string {
	return fmt.Sprintf(`{"connector":%q,"seq":%q}`, name, seq)
}

// LivePing is how often a real connector's change stream sends a ping
// comment (connector/api's DefaultLivePing), which a gateway holding many
// connectors pays for even when nothing happens.
const LivePing = 15 * time.Second

// serveIdleChangeStream is the change stream of a connector with no
// threads, as a real one sends it: a reset, synced, then a ping comment
// every LivePing until the gateway goes. Without it the gateway's fleet
// reader would take the simulated connectors for ones too old to have a
// stream, and its cost per connector would go unmeasured.
func serveIdleChangeStream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	inst := fleet.NewInstance()
	reset, _ := json.Marshal(fleet.Reset{Instance: inst})
	buf := fleet.AppendEvent(nil, fleet.Event{ID: fleet.FormatEventID(inst, 0), Name: fleet.EventReset, Data: reset})
	buf = fleet.AppendEvent(buf, fleet.Event{ID: fleet.FormatEventID(inst, 0), Name: fleet.EventSynced, Data: []byte("{}")})
	flush := http.NewResponseController(w).Flush
	if _, err := w.Write(buf); err != nil || flush() != nil {
		return
	}
	ping := time.NewTicker(LivePing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if _, err := w.Write([]byte(fleet.Ping)); err != nil || flush() != nil {
				return
			}
		}
	}
}
