// Package presence tracks which connectors are online. Each connected
// connector is pinged over its tunnel every heartbeat interval; one that
// misses two pings in a row is closed and shown offline. Offline connectors
// stay listed, with their last heartbeat, so a person sees that a machine
// went away rather than that it never existed.
package presence

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Statuses of an endpoint.
const (
	Online  = "online"
	Offline = "offline"
)

// Conn is a connector's live tunnel.
type Conn interface {
	http.RoundTripper
	Ping(ctx context.Context) error
	Done() <-chan struct{}
	Close(reason string) error
}

// Info describes a connection when it is made.
type Info struct {
	Version  string
	Address  string
	Protocol string // "h2" or "legacy-json"
}

// Endpoint is one connector as the endpoints list shows it.
type Endpoint struct {
	Name          string `json:"name"`
	URL           string `json:"url"`
	Status        string `json:"status"`
	LastHeartbeat int64  `json:"lastHeartbeat"` // ms since the epoch
	ConnectedAt   int64  `json:"connectedAt"`
	Version       string `json:"version"`
	Address       string `json:"address"`
	Protocol      string `json:"protocol"`
}

// Registry holds the connectors.
type Registry struct {
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]*entry
	// OnChange, when set, hears every online/offline transition.
	OnChange func(name, status string)
}

type entry struct {
	conn          Conn
	info          Info
	connectedAt   time.Time
	lastHeartbeat time.Time
	online        bool
	stop          context.CancelFunc
}

// New returns a registry that pings every interval.
func New(interval time.Duration) *Registry {
	return &Registry{interval: interval, now: time.Now, entries: map[string]*entry{}}
}

// Attach makes c the connection for name. An older connection under the
// same name is closed with a reason saying it was replaced (the caller has
// checked the newcomer may use the name).
func (r *Registry) Attach(name string, c Conn, info Info) {
	ctx, stop := context.WithCancel(context.Background())
	now := r.now()
	e := &entry{conn: c, info: info, connectedAt: now, lastHeartbeat: now, online: true, stop: stop}
	r.mu.Lock()
	old := r.entries[name]
	r.entries[name] = e
	r.mu.Unlock()
	if old != nil && old.online {
		old.stop()
		old.conn.Close("replaced by a newer connection for " + name)
	}
	r.changed(name, Online)
	go r.watch(ctx, name, e)
}

// watch pings e until it goes away.
func (r *Registry) watch(ctx context.Context, name string, e *entry) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.conn.Done():
			r.offline(name, e)
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, r.interval)
		err := e.conn.Ping(pctx)
		cancel()
		if err == nil {
			misses = 0
			r.mu.Lock()
			e.lastHeartbeat = r.now()
			r.mu.Unlock()
			continue
		}
		if misses++; misses >= 2 {
			e.conn.Close("missed two heartbeats")
			r.offline(name, e)
			return
		}
	}
}

func (r *Registry) offline(name string, e *entry) {
	r.mu.Lock()
	was := e.online
	e.online = false
	current := r.entries[name] == e
	r.mu.Unlock()
	if was && current {
		r.changed(name, Offline)
	}
}

func (r *Registry) changed(name, status string) {
	if r.OnChange != nil {
		r.OnChange(name, status)
	}
}

// Get returns name's connection when it is online; known says whether the
// name was ever seen.
func (r *Registry) Get(name string) (c Conn, online, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		return nil, false, false
	}
	return e.conn, e.online, true
}

// List returns every known connector, sorted by name.
func (r *Registry) List() []Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Endpoint, 0, len(r.entries))
	for name, e := range r.entries {
		status := Offline
		if e.online {
			status = Online
		}
		out = append(out, Endpoint{
			Name: name, URL: "tunnel://" + name, Status: status,
			LastHeartbeat: e.lastHeartbeat.UnixMilli(), ConnectedAt: e.connectedAt.UnixMilli(),
			Version: e.info.Version, Address: e.info.Address, Protocol: e.info.Protocol,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Online counts connected connectors.
func (r *Registry) Online() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		if e.online {
			n++
		}
	}
	return n
}

// CloseAll closes every connection (gateway shutdown).
func (r *Registry) CloseAll(reason string) {
	r.mu.Lock()
	entries := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	for _, e := range entries {
		e.stop()
		e.conn.Close(reason)
	}
}
