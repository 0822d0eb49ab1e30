// Package presence tracks which connectors are online. Each connected
// connector is pinged over its tunnel every heartbeat interval; one that
// misses two pings in a row is shown offline and closed. Offline connectors
// stay listed, with their last heartbeat, so a person sees that a machine
// went away rather than that it never existed.
//
// Closing a connection never holds the registry or its caller: a connector
// that stopped reading may take a while to let go, so connections are
// closed in the background — after the name is shown offline, or after a
// replacement has taken it.
//
// A name belongs to one instance at a time. A connector proves its
// instance (one per storage root) with a key it never shows; the registry
// knows it only by its fingerprint (instance.go). A newer connection from
// the same instance replaces the older one, as after a network blip; one
// from another instance is refused while the name is online, unless it
// asks to take over, and then the older one is told who took its place.
package presence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// Moved is what OnChange hears, instead of Offline, for a connection
// released because its connector is online on another replica now
// (Release): the machine was never away.
const Moved = "moved"

// Conn is a connector's live tunnel.
type Conn interface {
	http.RoundTripper
	Ping(ctx context.Context) error
	Done() <-chan struct{}
	// Close ends the connection, telling the connector why. Its error is
	// the close handshake's: the connection is gone either way.
	Close(reason string) error
}

// drop closes c for reason. The registry drops connections it no longer
// wants, so the close handshake's error leaves nothing to do.
func drop(c Conn, reason string) { _ = c.Close(reason) }

// Credentials a connection was made with (Info.Credential).
const (
	// CredentialToken is a connector token bound to the connection's name.
	CredentialToken = "token"
	// CredentialSecret is the gateway's shared secret, good for any name.
	CredentialSecret = "secret"
)

// ErrTokenBound refuses the shared secret a name whose connector
// authenticates with a token bound to that name.
var ErrTokenBound = errors.New("held by a token-bound connector")

// Info describes a connection when it is made.
type Info struct {
	Version  string
	Address  string
	Protocol string // "h2" or "legacy-json"
	// Credential is how the connection authenticated: CredentialToken or
	// CredentialSecret.
	Credential string
	// Instance is the fingerprint of the connector's instance (one per
	// storage root, the same across its restarts: InstanceOf), never the
	// key or id it was made from; empty for original clients, which are
	// replaced by any newcomer as before (Differs).
	Instance string
	// Takeover says the newcomer asked to take the name from another
	// instance (connect --takeover). Not kept.
	Takeover bool
}

// ConflictError is Attach's refusal of a connection from another instance
// than the one holding the name online, when it did not ask to take over:
// two machines (or storage roots) using one name would otherwise knock
// each other off at every reconnection.
type ConflictError struct {
	Name string
	// Holder is the connection holding the name, Since when it connected.
	Holder Info
	Since  time.Time
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("connector name %q is held by instance %s from %s since %s: another machine or storage root uses this name; choose another --name, or pass --takeover to replace it",
		e.Name, e.Holder.Instance, e.Holder.Address, e.Since.UTC().Format(time.RFC3339))
}

// instanceConflict says whether newer, from another instance than held,
// must be refused the name: it did not ask to take over.
func instanceConflict(held, newer Info) bool {
	return !newer.Takeover && Differs(held.Instance, newer.Instance)
}

// TakeoverReason is the close reason of a connection another instance
// took over; it ends with tunnel.TakeoverMark, which tells the connector
// to stop reconnecting.
func TakeoverReason(by Info) string {
	return fmt.Sprintf("replaced by instance %s from %s (--takeover)", cmp.Or(by.Instance, "(none)"), by.Address)
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
	// Credential is CredentialToken or CredentialSecret; other replicas
	// read it too, to refuse the shared secret a name a token holds there.
	Credential string `json:"credential"`
	// Instance is the fingerprint of the connector's instance
	// (Info.Instance); empty for original clients. Other replicas read it
	// to refuse a second instance the name.
	Instance string `json:"instance,omitempty"`
}

// Registry holds the connectors.
type Registry struct {
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]*entry
	// OnChange, when set, hears every transition: Online, Offline, and
	// Moved for a connection Release took off.
	OnChange func(name, status string)
	// OnEnd, when set, is told once of each connection Attach took, when
	// the connection has ended (its Done is closed), whether it was
	// replaced, released or dropped before: what ends with a connection is
	// done there, on the one goroutine the registry keeps per connection,
	// rather than on another that only waits. Set it before Attach.
	OnEnd func(name string, c Conn)
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

// Attach makes c the connection for name, unless the name is held online
// by a connection made with a token bound to it and c came with the
// shared secret: then it returns ErrTokenBound and leaves c to the caller
// (the caller has asked its bindings about an offline holder already). Nor does it when another
// instance holds the name online and c did not ask to take over: then it
// returns a *ConflictError. An older connection under the name is closed
// in the background with a reason saying it was replaced (by whom, for a
// takeover), so one that no longer drains never holds up its replacement;
// replaced describes it (nil when none was online). The caller has
// checked the newcomer may use the name.
func (r *Registry) Attach(name string, c Conn, info Info) (replaced *Info, err error) {
	ctx, stop := context.WithCancel(context.Background())
	now := r.now()
	stored := info
	stored.Takeover = false
	e := &entry{conn: c, info: stored, connectedAt: now, lastHeartbeat: now, online: true, stop: stop}
	r.mu.Lock()
	old := r.entries[name]
	if old != nil && old.online && takesFromToken(old.info, info) {
		r.mu.Unlock()
		stop()
		return nil, ErrTokenBound
	}
	if old != nil && old.online && instanceConflict(old.info, info) {
		conflict := &ConflictError{Name: name, Holder: old.info, Since: old.connectedAt}
		r.mu.Unlock()
		stop()
		return nil, conflict
	}
	r.entries[name] = e
	reason := "replaced by a newer connection for " + name
	if old != nil && old.online {
		old.online = false
		prev := old.info
		replaced = &prev
		if Differs(prev.Instance, info.Instance) {
			reason = TakeoverReason(info)
		}
	}
	r.mu.Unlock()
	if old != nil {
		old.stop()
		if replaced != nil {
			go drop(old.conn, reason)
		}
	}
	r.changed(name, Online)
	go r.watch(ctx, name, e)
	return replaced, nil
}

// takesFromToken says whether a connection made with newer would take a
// name from one made with a token bound to it: only a token may.
func takesFromToken(held, newer Info) bool {
	return held.Credential == CredentialToken && newer.Credential != CredentialToken
}

// Conflict is the *ConflictError Attach would return for a connection
// described by info under name now, or nil: a check before the WebSocket
// upgrade, so the refusal can be an HTTP answer. Attach checks again.
func (r *Registry) Conflict(name string, info Info) *ConflictError {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok || !e.online || !instanceConflict(e.info, info) {
		return nil
	}
	return &ConflictError{Name: name, Holder: e.info, Since: e.connectedAt}
}

// HeldByToken says whether Attach would refuse the shared secret name:
// a connection made with a token holds it online. Whether a name a token
// held before is still the token's, once offline, is the gateway's to
// say (its bindings outlive this registry).
func (r *Registry) HeldByToken(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	return ok && e.online && takesFromToken(e.info, Info{Credential: CredentialSecret})
}

// watch pings e until it goes away, then waits for its connection to end
// and tells OnEnd.
func (r *Registry) watch(ctx context.Context, name string, e *entry) {
	if r.OnEnd != nil {
		defer func() {
			<-e.conn.Done()
			r.OnEnd(name, e.conn)
		}()
	}
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
			// Offline first: a connection that missed its heartbeats may
			// also be slow to close.
			r.offline(name, e)
			go drop(e.conn, "missed two heartbeats")
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

// Release takes c off the registry without closing it, when it is still
// name's connection: the connector is online on another replica now, and
// the caller closes c once what is in flight on it is done. OnChange
// hears Moved. It says whether c was name's online connection.
func (r *Registry) Release(name string, c Conn) bool {
	r.mu.Lock()
	e, ok := r.entries[name]
	released := ok && e.conn == c && e.online
	if released {
		e.online = false
	}
	r.mu.Unlock()
	if !released {
		return false
	}
	e.stop()
	r.changed(name, Moved)
	return true
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
			Credential: e.info.Credential, Instance: e.info.Instance,
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

// CloseAll closes every connection (gateway shutdown), all at once, and
// returns when each Close has. Each name online goes offline first, told
// to OnChange as when its connector leaves, so a stop shows in the log
// how long each machine was away.
func (r *Registry) CloseAll(reason string) {
	r.mu.Lock()
	entries := make([]*entry, 0, len(r.entries))
	var wentOffline []string
	for name, e := range r.entries {
		entries = append(entries, e)
		if e.online {
			e.online = false
			wentOffline = append(wentOffline, name)
		}
	}
	r.mu.Unlock()
	sort.Strings(wentOffline)
	for _, name := range wentOffline {
		r.changed(name, Offline)
	}
	var wg sync.WaitGroup
	for _, e := range entries {
		e.stop()
		wg.Go(func() { drop(e.conn, reason) })
	}
	wg.Wait()
}
