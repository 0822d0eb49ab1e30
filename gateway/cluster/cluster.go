// Package cluster lets several gateway replicas act as one: each tells the
// others over NATS which connectors it holds, keeps the cluster-wide view
// in memory, and forwards a dashboard request for a connector held by
// another replica to that replica over HTTP/2 (forward.go).
//
// Presence travels on plain NATS core subjects. A replica publishes an
// update when one of its connectors comes or goes, a full snapshot every
// interval (with each connector's last heartbeat), and a leave when it
// shuts down; a replica that
// starts asks the others for their snapshots, so it knows the world at
// once. What a replica has not repeated for three intervals is shown
// offline: a replica that died takes only its own connectors with it, and
// they reconnect to the others. When two replicas hold the same name, the
// newer connection wins, as on a single gateway.
//
// Original clients' registrations (POST /api/gateway/register) are shared
// too, sealed (gateway/legacy's SealRegistration; registration.go): the
// socket may land on another replica than the registration.
//
// Messages and forwarded requests are signed with a key derived from the
// gateway key every replica shares. Nothing of NATS is on the request
// path: a lookup is a map read.
package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http/httputil"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/presence"
)

// Subjects the replicas talk on.
const (
	subjectPresence = "uncaged.gateway.presence"
	subjectSnapshot = "uncaged.gateway.snapshot"
)

// DefaultInterval is how often a replica repeats its snapshot when
// Options.Interval is 0.
const DefaultInterval = 15 * time.Second

// expiryIntervals is how many intervals of silence make a replica's
// connectors offline; forgetAfter is when it is dropped from the table.
const (
	expiryIntervals = 3
	forgetAfter     = time.Hour
)

// Options configure a replica's part in the cluster.
type Options struct {
	// NATS is the server URL (several, comma-separated, for a NATS cluster).
	NATS string
	// ReplicaID names this replica; it must differ between replicas.
	ReplicaID string
	// Advertise is where the other replicas reach this one:
	// http://host:port, served with unencrypted HTTP/2 enabled.
	Advertise string
	// Key is the gateway signing key, the same on every replica. The
	// cluster signs with a key derived from it, never the key itself.
	Key []byte
	// Interval is the snapshot period (0: DefaultInterval); a replica
	// silent for three of them is taken for dead.
	Interval time.Duration
	// DialTimeout bounds connecting to another replica (0: 5 s).
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for another replica's response
	// headers, streams included (0: 60 s).
	ResponseHeaderTimeout time.Duration
	Logger                *slog.Logger
	// UntrustedLogger takes the lines anybody who can publish on NATS can
	// cause — an unsigned, stale, replayed or misdirected message, the
	// errors a flood of them brings (a slow consumer) — one per message
	// otherwise: the caller rate-limits it (logging.Limited). nil: Logger.
	UntrustedLogger *slog.Logger
	// ErrorLog takes the forwarding proxy's own lines (a body that broke
	// while it was copied), which name addresses and errors: the caller
	// rate-limits it (logging.Limited.StdLogger). nil: UntrustedLogger,
	// at warn level.
	ErrorLog *log.Logger
	// Streams, when set, are the event streams the gateway relays: a
	// stream forwarded to another replica is wrapped there, so that a
	// stopping gateway ends it at an event's end (eventstream.Set.End).
	Streams *eventstream.Set
}

// Local is this replica's own connectors, as the gateway holds them.
type Local interface {
	// List is every connector this replica knows (presence.Registry.List).
	List() []presence.Endpoint
	// Replace lets go of this replica's connection for name, because
	// replica holds a newer one; reason is what the connector is told. It
	// must not block: it is called as messages arrive.
	Replace(name, replica, reason string)
	// Registered applies an original client's registration made on
	// another replica.
	Registered(r legacy.Registration)
}

// Endpoint is a connector in the cluster-wide list: where it is held.
type Endpoint struct {
	presence.Endpoint
	Replica string `json:"replica"`
}

// Route is where a connector held by another replica is.
type Route struct {
	Replica   string
	Advertise string
	Online    bool
}

// Cluster is this replica's membership.
type Cluster struct {
	o   Options
	key []byte
	// signer signs and checks hop headers with key.
	signer *signer
	now    func() time.Time
	local  Local
	nc     *nats.Conn
	proxy  *httputil.ReverseProxy

	mu    sync.RWMutex
	peers map[string]*peer
	// catch is whether this replica has heard the others since it
	// connected (catchup.go).
	catch catchUp
	// seen holds the MACs of the messages received while they are young
	// enough to pass decode, with when they stop being: a message
	// captured off NATS and published again is ignored, so it cannot
	// replay a leave, an old snapshot or an undone registration.
	seen map[string]time.Time

	// pubMu keeps the parts of one snapshot together on the wire; left,
	// under it, says the leave is sent: nothing but the leave may follow,
	// or the others would take this replica for back, then for silent.
	pubMu sync.Mutex
	left  bool
	// dirty are the local connectors changed since the last update;
	// changed wakes the loop to announce them, in batches, so a wave of
	// reconnections costs one List per batch rather than per connector.
	dirtyMu sync.Mutex
	dirty   map[string]struct{}
	changed chan struct{}

	forwarded *prometheus.CounterVec
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

// peer is what one other replica said last.
type peer struct {
	advertise string
	lastSeen  time.Time
	left      bool
	endpoints map[string]presence.Endpoint
	// pending is a snapshot arriving in parts, applied at its last part.
	pending map[string]presence.Endpoint
}

// New checks the options; Start joins the cluster.
func New(o Options) (*Cluster, error) {
	switch {
	case o.NATS == "":
		return nil, errors.New("cluster: no NATS URL")
	case o.ReplicaID == "":
		return nil, errors.New("cluster: no replica id")
	case len(o.Key) < 32:
		return nil, errors.New("cluster: the gateway key must be at least 32 bytes")
	}
	if _, err := parseAdvertise(o.Advertise); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.UntrustedLogger == nil {
		o.UntrustedLogger = o.Logger
	}
	if o.ErrorLog == nil {
		o.ErrorLog = slog.NewLogLogger(o.UntrustedLogger.Handler(), slog.LevelWarn)
	}
	// A key of its own: a cluster MAC can never pass for a token signature.
	m := hmac.New(sha256.New, o.Key)
	m.Write([]byte("uncaged-gateway cluster v1"))
	c := &Cluster{
		o: o, key: m.Sum(nil), now: time.Now, peers: map[string]*peer{}, seen: map[string]time.Time{},
		catch: catchUp{wake: make(chan struct{})},
		dirty: map[string]struct{}{}, changed: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_cluster_forwarded_requests_total",
			Help: "Dashboard requests forwarded to the replica holding the connector, by result (unreached: the replica refused the connection, and the request waited for the connector to reconnect elsewhere).",
		}, []string{"result"}),
	}
	for _, r := range []string{resultOK, resultError, resultUnreached, resultNotHeld} {
		c.forwarded.WithLabelValues(r)
	}
	c.signer = newSigner(c.key)
	c.proxy = c.newProxy()
	return c, nil
}

// ReplicaID is this replica's name.
func (c *Cluster) ReplicaID() string { return c.o.ReplicaID }

// Advertise is where the other replicas reach this one.
func (c *Cluster) Advertise() string { return c.o.Advertise }

// Collectors are the cluster's metrics, for the gateway's registry:
// uncaged_gateway_cluster_peers (replicas heard from within the expiry),
// uncaged_gateway_cluster_nats_connected and
// uncaged_gateway_cluster_forwarded_requests_total{result}.
func (c *Cluster) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "uncaged_gateway_cluster_peers", Help: "Other replicas heard from recently.",
		}, func() float64 { return float64(c.Peers()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "uncaged_gateway_cluster_nats_connected", Help: "1 while this replica is connected to NATS.",
		}, func() float64 {
			if c.Connected() {
				return 1
			}
			return 0
		}),
		c.forwarded,
	}
}

// Start connects to NATS and joins: it listens to the others, asks them
// for their snapshots and publishes its own every interval. An unreachable
// NATS is retried in the background (the gateway still serves its own
// connectors; /readyz says it is not ready).
func (c *Cluster) Start(local Local) error {
	c.local = local
	// The connect callbacks run on nats' own goroutine, possibly before the
	// subscriptions exist; they wait, so the snapshots their call for
	// snapshots brings back are not missed.
	subscribed := make(chan struct{})
	greet := func(event string) nats.ConnHandler {
		return func(nc *nats.Conn) { <-subscribed; c.greet(nc, event) }
	}
	nc, err := nats.Connect(c.o.NATS,
		nats.Name("uncaged-gateway "+c.o.ReplicaID),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.RetryOnFailedConnect(true),
		nats.ConnectHandler(greet("connected to NATS")),
		nats.ReconnectHandler(greet("reconnected to NATS")),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // Close: this replica is leaving, and says so
			}
			c.o.Logger.Warn("disconnected from NATS", "err", err.Error())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.o.UntrustedLogger.Warn("NATS error", "err", err.Error())
		}),
	)
	if err != nil {
		close(subscribed)
		return fmt.Errorf("cluster: NATS %s: %w", c.o.NATS, err)
	}
	c.nc = nc
	defer close(subscribed)
	go c.loop()
	// One subscription for all presence, so one goroutine receives it in
	// order and a snapshot's parts are never interleaved.
	for subject, handler := range map[string]nats.MsgHandler{
		subjectPresence: c.receive,
		subjectSnapshot: c.answerSnapshot,
	} {
		if _, err := nc.Subscribe(subject, handler); err != nil {
			nc.Close()
			return fmt.Errorf("cluster: subscribe %s: %w", subject, err)
		}
	}
	if nc.IsConnected() {
		// Listening once Start returns: the server has the subscriptions.
		// If it does not answer in time, they reach it later; the next
		// snapshots make up for what is missed meanwhile.
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			c.o.Logger.Warn("cluster subscriptions not confirmed", "err", err.Error())
		}
	}
	return nil
}

// greet announces this replica and asks the others for theirs, on every
// (re)connection: what was published while cut off was lost.
func (c *Cluster) greet(nc *nats.Conn, event string) {
	c.o.Logger.Info(event, "replica", c.o.ReplicaID, "url", nc.ConnectedUrlRedacted())
	c.began()
	c.publishSnapshot()
	hello := c.signed(message{Kind: kindHello})
	hello.Subject = subjectSnapshot
	if err := nc.PublishMsg(hello); err != nil {
		c.o.Logger.Warn("cluster publish failed", "err", err.Error())
	}
}

// loop repeats the snapshot every interval and forgets long-gone replicas.
func (c *Cluster) loop() {
	defer close(c.stopped)
	t := time.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.changed:
			c.publishChanges()
			continue
		case <-t.C:
		}
		c.publishSnapshot()
		c.sweep()
	}
}

// Close leaves the cluster: the others hear that this replica's
// connectors are going, then the NATS connection closes.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.nc == nil {
			return
		}
		close(c.stop)
		<-c.stopped
		c.pubMu.Lock()
		c.left = true
		c.pubMu.Unlock()
		if c.nc.IsConnected() { // else the leave is lost anyway: silence will tell
			c.publish(message{Kind: kindLeave})
			if err := c.nc.FlushTimeout(2 * time.Second); err != nil {
				c.o.Logger.Warn("cluster leave may be lost", "err", err.Error())
			}
		}
		c.nc.Close()
	})
}

// Connected says whether the NATS connection is up.
func (c *Cluster) Connected() bool { return c.nc != nil && c.nc.IsConnected() }

// LocalChanged tells the others that this replica's connector name came
// or went (presence.Registry.OnChange).
func (c *Cluster) LocalChanged(name string) {
	c.dirtyMu.Lock()
	c.dirty[name] = struct{}{}
	c.dirtyMu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default: // the loop is already woken
	}
}

// publishChanges announces the connectors changed since the last time.
func (c *Cluster) publishChanges() {
	c.dirtyMu.Lock()
	dirty := c.dirty
	c.dirty = map[string]struct{}{}
	c.dirtyMu.Unlock()
	var eps []presence.Endpoint
	for _, e := range c.local.List() {
		if _, ok := dirty[e.Name]; ok {
			eps = append(eps, e)
		}
	}
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if c.left {
		return
	}
	for len(eps) > 0 {
		n := min(len(eps), maxPerMessage)
		c.publish(message{Kind: kindUpdate, Endpoints: eps[:n]})
		eps = eps[n:]
	}
}

// maxPerMessage keeps a message far below NATS's default 1 MiB payload
// limit (an endpoint is about 200 bytes of JSON).
const maxPerMessage = 500

// publishSnapshot sends everything this replica holds, in parts when
// there is much: the receivers apply it when the last part is in.
func (c *Cluster) publishSnapshot() {
	eps := c.local.List()
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if c.left {
		return // a call for snapshots arriving while this replica leaves
	}
	peers := c.alivePeers()
	for part := 0; part == 0 || len(eps) > 0; part++ {
		n := min(len(eps), maxPerMessage)
		m := message{Kind: kindSnapshot, Part: part, More: len(eps) > n, Endpoints: eps[:n]}
		if !m.More {
			m.Peers = peers // so a replica catching up knows whom to wait for
		}
		c.publish(m)
		eps = eps[n:]
	}
}

// publish signs m and sends it to every replica.
func (c *Cluster) publish(m message) {
	if err := c.nc.PublishMsg(c.signed(m)); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		c.o.Logger.Warn("cluster publish failed", "err", err.Error())
	}
}

func (c *Cluster) signed(m message) *nats.Msg {
	m.Replica, m.Advertise, m.Sent = c.o.ReplicaID, c.o.Advertise, c.now().UnixMilli()
	data, mac, err := encode(c.key, m)
	if err != nil { // presence.Endpoint always marshals
		panic(err)
	}
	msg := nats.NewMsg(subjectPresence)
	msg.Data = data
	msg.Header.Set(macHeader, mac)
	return msg
}

// answerSnapshot answers another replica's signed hello with this
// replica's snapshot. The answer goes to everyone, on the presence subject:
// an extra snapshot harms nobody, and the parts of a snapshot stay in order
// with the rest. Unsigned, replayed or foreign calls get nothing.
func (c *Cluster) answerSnapshot(msg *nats.Msg) {
	if _, ok := c.accept(msg, "call for snapshots", func(kind string) bool { return kind == kindHello }); ok {
		c.publishSnapshot()
	}
}

// accept decodes a message that arrived as what, and says whether to act
// on it: signed with the cluster key, fresh, of a kind that subject
// carries, from another replica, and not seen before. Why not is logged.
func (c *Cluster) accept(msg *nats.Msg, what string, carries func(kind string) bool) (message, bool) {
	mac := msg.Header.Get(macHeader)
	m, err := decode(c.key, msg.Data, mac, c.now())
	if err == nil {
		// Signed and fresh, this replica's own echo too: it is hearing.
		c.mu.Lock()
		c.heard(c.now())
		c.mu.Unlock()
	}
	switch {
	case err != nil:
		c.o.UntrustedLogger.Warn(what+" ignored", "err", err.Error())
	case !carries(m.Kind):
		c.o.UntrustedLogger.Warn(what+" ignored: wrong kind", "replica", m.Replica, "kind", m.Kind)
	case m.Replica == c.o.ReplicaID:
		if m.Advertise != c.o.Advertise {
			c.o.Logger.Error("another replica uses this replica's id", "replica", m.Replica, "advertise", m.Advertise)
		}
	case !c.firstSighting(mac, m.Sent):
		c.o.UntrustedLogger.Warn(what+" ignored: replayed", "replica", m.Replica, "kind", m.Kind)
	default:
		return m, true
	}
	return m, false
}

// receive applies another replica's message to the table, and closes this
// replica's connections that a newer one elsewhere replaces.
func (c *Cluster) receive(msg *nats.Msg) {
	// Hellos belong on the snapshot subject (answerSnapshot).
	m, ok := c.accept(msg, "cluster message", func(kind string) bool { return kind != kindHello })
	if !ok {
		return
	}
	if m.Kind == kindRegistration {
		r, err := openRegistration(c.sealKey(), m.Sealed)
		if err != nil {
			c.o.Logger.Warn("cluster registration ignored", "replica", m.Replica, "err", err.Error())
			return
		}
		c.local.Registered(r)
		return
	}
	c.apply(m)
	c.resolveConflicts(m)
}

// firstSighting records a message's MAC and says whether it is new. The
// record lasts as long as decode would take the message (sent at sent, ms
// since the epoch); after that the age check refuses it on its own.
func (c *Cluster) firstSighting(mac string, sent int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[mac]; ok {
		return false
	}
	c.seen[mac] = time.UnixMilli(sent).Add(maxMessageAge)
	return true
}

func (c *Cluster) apply(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.peers[m.Replica]
	if !ok {
		c.o.Logger.Info("replica joined", "replica", m.Replica, "advertise", m.Advertise)
		p = &peer{endpoints: map[string]presence.Endpoint{}}
		c.peers[m.Replica] = p
	}
	p.lastSeen, p.left = c.now(), false
	if m.Advertise != "" {
		p.advertise = m.Advertise
	}
	switch m.Kind {
	case kindLeave:
		p.left, p.pending = true, nil
		c.o.Logger.Info("replica left", "replica", m.Replica)
	case kindSnapshot:
		if m.Part == 0 || p.pending == nil {
			p.pending = map[string]presence.Endpoint{}
		}
		for _, e := range m.Endpoints {
			p.pending[e.Name] = e
		}
		if !m.More {
			p.endpoints, p.pending = p.pending, nil
		}
	case kindUpdate:
		for _, e := range m.Endpoints {
			p.endpoints[e.Name] = e
			if p.pending != nil {
				p.pending[e.Name] = e
			}
		}
	}
	c.tableChanged(m)
}

// resolveConflicts closes this replica's connection for a name another
// replica announces a newer connection for.
func (c *Cluster) resolveConflicts(m message) {
	if c.local == nil {
		return
	}
	var theirs []presence.Endpoint
	for _, e := range m.Endpoints {
		if e.Status == presence.Online {
			theirs = append(theirs, e)
		}
	}
	if len(theirs) == 0 {
		return
	}
	mine := map[string]presence.Endpoint{}
	for _, e := range c.local.List() {
		if e.Status == presence.Online {
			mine[e.Name] = e
		}
	}
	for _, e := range theirs {
		own, ok := mine[e.Name]
		if ok && newer(e, m.Replica, own, c.o.ReplicaID) {
			c.local.Replace(e.Name, m.Replica, fmt.Sprintf("replaced by a newer connection for %s on replica %s", e.Name, m.Replica))
		}
	}
}

// newer says whether connection a (on replica ra) is newer than b (on rb);
// the replica ids break a tie, so exactly one side gives way.
func newer(a presence.Endpoint, ra string, b presence.Endpoint, rb string) bool {
	if a.ConnectedAt != b.ConnectedAt {
		return a.ConnectedAt > b.ConnectedAt
	}
	return ra > rb
}

// alive says whether p is to be believed now. While this replica hears
// nothing the others' silence is its own deafness, not theirs: what they
// said last holds as it held when it stopped hearing (heardNow), so a
// NATS outage does not turn every connector held elsewhere offline.
func (c *Cluster) alive(p *peer, now time.Time) bool {
	now = c.heardNow(now)
	return !p.left && now.Sub(p.lastSeen) < expiryIntervals*c.o.Interval
}

// sweep logs replicas that fell silent, forgets the long-gone and drops
// the MACs of messages too old to pass decode anyway.
func (c *Cluster) sweep() {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for mac, until := range c.seen {
		if now.After(until) {
			delete(c.seen, mac)
		}
	}
	changed := false
	for id, p := range c.peers {
		silent := c.heardNow(now).Sub(p.lastSeen) // not this replica's own deafness
		switch {
		case silent >= forgetAfter:
			delete(c.peers, id)
			changed = true
		case silent >= expiryIntervals*c.o.Interval && silent < (expiryIntervals+1)*c.o.Interval && !p.left:
			c.o.Logger.Warn("replica silent: its connectors are offline until they reconnect elsewhere", "replica", id, "silent", silent.Round(time.Second).String())
			changed = true
		}
	}
	if changed {
		// Its connectors went offline, or out of the table, with no
		// message: those waiting on Changed look again.
		c.tableChanged(message{})
	}
}

// alivePeers are the ids of the other replicas heard from recently.
func (c *Cluster) alivePeers() []string {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for id, p := range c.peers {
		if c.alive(p, now) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Peers counts the other replicas heard from recently.
func (c *Cluster) Peers() int {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, p := range c.peers {
		if c.alive(p, now) {
			n++
		}
	}
	return n
}

// Lookup says where another replica holds name: known is false when no
// other replica ever announced it; Online when one that is alive holds it
// now (the newest connection, if two do).
func (c *Cluster) Lookup(name string) (r Route, known bool) {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lookupLocked(name, now)
}

// lookupLocked is Lookup with c.mu held.
func (c *Cluster) lookupLocked(name string, now time.Time) (r Route, known bool) {
	var best presence.Endpoint
	for id, p := range c.peers {
		e, ok := p.endpoints[name]
		if !ok {
			continue
		}
		known = true
		if e.Status != presence.Online || !c.alive(p, now) {
			continue
		}
		if !r.Online || newer(e, id, best, r.Replica) {
			r, best = Route{Replica: id, Advertise: p.advertise, Online: true}, e
		}
	}
	return r, known
}

// Endpoints is the cluster-wide list: this replica's connectors (local)
// and the others', one entry per name — where it is online (the newest
// connection), else the most recent sighting — sorted by name.
func (c *Cluster) Endpoints(local []presence.Endpoint) []Endpoint {
	byName := map[string]Endpoint{}
	consider := func(e presence.Endpoint, replica string, alive bool) {
		if !alive {
			e.Status = presence.Offline
		}
		cand := Endpoint{Endpoint: e, Replica: replica}
		cur, ok := byName[e.Name]
		if !ok || better(cand, cur) {
			byName[e.Name] = cand
		}
	}
	for _, e := range local {
		consider(e, c.o.ReplicaID, true)
	}
	now := c.now()
	c.mu.RLock()
	for id, p := range c.peers {
		alive := c.alive(p, now)
		for _, e := range p.endpoints {
			consider(e, id, alive)
		}
	}
	c.mu.RUnlock()
	out := make([]Endpoint, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// better says which of two entries for one name the list shows.
func better(a, b Endpoint) bool {
	if (a.Status == presence.Online) != (b.Status == presence.Online) {
		return a.Status == presence.Online
	}
	if a.Status == presence.Online {
		return newer(a.Endpoint, a.Replica, b.Endpoint, b.Replica)
	}
	if a.LastHeartbeat != b.LastHeartbeat {
		return a.LastHeartbeat > b.LastHeartbeat
	}
	return a.Replica > b.Replica
}
