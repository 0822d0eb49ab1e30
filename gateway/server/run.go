package server

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/version"
)

// Config is what Run serves: the gateway's Options and where to listen,
// and, with NATS set, the cluster this replica joins.
type Config struct {
	// Options build the gateway; Run sets Options.Cluster itself.
	Options Options
	// Listen is the address to listen on, unless Listener is set.
	Listen string
	// Listener, when set, is served instead of listening on Listen, so a
	// test can learn the address before Run starts. Run closes it.
	Listener net.Listener
	// TrustedProxiesGiven are the trusted proxies as the operator wrote
	// them, for the start-up log line.
	TrustedProxiesGiven []string
	// NATS, when set, makes this gateway a replica of a cluster.
	NATS string
	// Advertise is where the other replicas reach this one (default: the
	// listening address, with the host name when it listens on every
	// interface); ReplicaID is its name (default: hostname:port).
	Advertise string
	ReplicaID string
	// SigningKey is the gateway's signing key, the same on every replica:
	// it signs the messages between replicas and seals the original
	// clients' tokens kept in the store.
	SigningKey []byte
	// Store says where the gateway keeps what outlives it (tokens and their
	// revocations, original clients' registrations, the fleet's history,
	// the audit log). Run opens it before serving and closes it last. With
	// neither a data directory nor a database URL nothing is kept, which
	// only tests want. Cluster mode needs a database every replica shares.
	Store store.Config
	// StandardLog, when set, sends what libraries write to the standard
	// log package (x/net's HTTP/2 client on a connector's misbehaving
	// tunnel, net/http's transport) through the gateway's logger, rate
	// limited, for as long as Run runs: in JSON mode every line of the
	// process is then JSON. The log package is the process's, so only
	// the serve command sets it, never a test running gateways side by
	// side.
	StandardLog bool

	// beforeServerStops, when set, is called during the stop once every
	// tunnel is closed and its end counted, while the HTTP server still
	// serves (a test scrapes /metrics then); shutdownTimeout replaces
	// ShutdownTimeout when set.
	beforeServerStops func()
	shutdownTimeout   time.Duration
	// serving, when set, is given the gateway once it is built, so a test
	// can wait for what it holds.
	serving func(*Gateway)
}

// ShutdownTimeout bounds how long Run's stop waits for the streams, the
// tunnels and the requests in flight to end, once its context ends.
const ShutdownTimeout = 10 * time.Second

// maxClusterInterval bounds how often a replica repeats its presence.
const maxClusterInterval = 5 * time.Second

// Run serves the gateway until ctx ends, then stops it in the order that
// loses the least (stop.go): /readyz fails and new tunnels are refused;
// in a cluster the connectors move to the other replicas (move.go) and
// then the others hear this one is leaving; the event streams it relays end at an
// event's end (so their clients resume elsewhere), the connectors are
// told "gateway shutting down" (so they log why and reconnect) and each
// one's end is logged and counted, and the HTTP server drains. Its last
// log line is "gateway stopped", with how long the stop took. It returns
// nil after a clean stop; a *StopError naming the requests still in
// flight when ShutdownTimeout ran out; else the error that stopped it.
func Run(ctx context.Context, cfg Config) error {
	logger := cfg.Options.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var stopping time.Time
	err := run(ctx, cfg, logger, &stopping)
	if !stopping.IsZero() {
		took := slog.Float64("duration_ms", float64(time.Since(stopping).Microseconds())/1000)
		if err != nil {
			logger.Error("gateway stopped", took, slog.String("err", err.Error()))
		} else {
			logger.Info("gateway stopped", took)
		}
	}
	return err
}

// run is Run, which sets *stopping when the stop begins: everything run
// defers is done before Run logs the stop's end.
func run(ctx context.Context, cfg Config, logger *slog.Logger, stopping *time.Time) error {
	// One rate limit for every line an unauthenticated party can cause,
	// the cluster's and the gateway's (bounds.go); what it left out is
	// logged before Run returns.
	limited := logging.NewLimited(logger.Handler(), logging.LimitOptions{})
	defer limited.Flush()
	cfg.Options.limited = limited
	if cfg.StandardLog {
		defer captureStandardLog(limited.StdLogger(slog.LevelWarn))()
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		_ = ln.Close() // the error that matters is err
		return err
	}
	if st != nil {
		defer func() { _ = st.Close() }() // last: everything above may still write to it
		// Token commands beside the gateway learn which database it uses
		// (guard.go in gateway/store). Without the claim (a file system
		// without locks) the gateway serves all the same.
		if release, err := st.Claim(ctx); err != nil {
			logger.Warn("store not claimed: token commands will not know this gateway uses it", "err", err.Error())
		} else {
			defer release()
		}
		pruneCtx, stopPruning := context.WithCancel(ctx)
		defer stopPruning()
		go pruneHistory(pruneCtx, st, cfg.Options.HistoryRetention, logger)
	}
	// The streams this replica relays, to connectors' tunnels and to other
	// replicas: one set, which the stop ends.
	cfg.Options.streams = eventstream.NewSet()
	var cl *cluster.Cluster
	if cfg.NATS != "" {
		var err error
		if cl, err = newCluster(ln.Addr(), cfg, logger); err != nil {
			_ = ln.Close() // the error that matters is err
			return err
		}
	}
	opts := cfg.Options
	opts.Cluster = cl
	opts.Store = st
	if st != nil {
		if opts.RegistrationKey = registrationKey(cfg); opts.RegistrationKey == nil {
			logger.Warn("original clients' registrations are kept in memory only: no key to seal their client tokens with (Config.SigningKey)")
		}
	}
	g := New(opts)
	if cfg.serving != nil {
		cfg.serving(g)
	}
	srv := g.HTTPServer()
	if cl != nil {
		// The other replicas forward over HTTP/2 without TLS.
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		if err := g.StartCluster(); err != nil {
			_ = ln.Close() // the error that matters is err
			return err
		}
		defer cl.Close()
		logger.Info("cluster mode", "replica", cl.ReplicaID(), "nats", redactURL(cfg.NATS))
		if every := cmp.Or(cfg.Options.RebalanceEvery, DefaultRebalanceEvery); every > 0 {
			rctx, stopRebalancing := context.WithCancel(ctx)
			defer stopRebalancing()
			go g.rebalanceLoop(rctx, every)
		}
	}
	errc := make(chan error, 1)
	drained := newDrainingListener(ln)
	bounded := g.Listener(drained)
	go func() { errc <- srv.Serve(bounded) }()
	logger.Info("gateway listening", "address", ln.Addr().String(), "version", version.Version, "trusted_proxies", cfg.TrustedProxiesGiven)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	*stopping = time.Now()
	logger.Info("gateway shutting down")
	// From here /readyz fails and new tunnels are refused (move.go).
	g.stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cfg.shutdownTimeout, ShutdownTimeout))
	defer cancel()
	if cl != nil {
		// The connectors move to the other replicas while this one still
		// serves and still hears the cluster (their new replicas'
		// announcements retire the tunnels here); then the others hear
		// this replica is leaving.
		g.moveConnectors(sctx)
		cl.Close()
	}
	g.streams.End(sctx)
	g.closeTunnels(sctx)
	if cfg.beforeServerStops != nil {
		cfg.beforeServerStops()
	}
	// Stop accepting without resetting what the kernel queued (drainlisten.go).
	drained.Drain()
	select {
	case <-drained.Closed():
	case <-sctx.Done():
	}
	g.closeIdleConnections()
	if err = srv.Shutdown(sctx); err != nil {
		err = &StopError{After: time.Since(*stopping), Requests: g.inFlight.stuck(), Err: err}
		_ = srv.Close() // cut off what is left; err says what it was
		// Cut off, their handlers fail at their next read or write and
		// return, each logging its request: those lines come before the
		// stop's last one, "gateway stopped". A handler that does not
		// return (blocked on something other than its connection) is not
		// waited for beyond cutOffGrace.
		gctx, gcancel := context.WithTimeout(context.Background(), cutOffGrace)
		if !g.inFlight.waitIdle(gctx) {
			logger.Warn("requests still running after their connections were cut off: their log lines may follow the stop's", "requests", requestCount(g.inFlight.stuck()))
		}
		gcancel()
	}
	// The requests have drained: flush their audit entries before the
	// store closes.
	actx, acancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer acancel()
	if aerr := g.closeAudit(actx); aerr != nil {
		logger.Warn("audit log not flushed", "err", aerr.Error())
	}
	return err
}

// captureStandardLog sends the standard log package's output to to, and
// returns what puts it back.
func captureStandardLog(to *log.Logger) (restore func()) {
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(to.Writer())
	log.SetFlags(0) // the logger adds the time
	log.SetPrefix("")
	return func() {
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	}
}

// openStore opens the store cfg names, or returns nil when it names none.
// A replica of a cluster refuses one that other processes cannot share.
func openStore(ctx context.Context, cfg Config, logger *slog.Logger) (store.Store, error) {
	if cfg.Store.DataDir == "" && cfg.Store.DatabaseURL == "" {
		if cfg.NATS != "" {
			return nil, errors.New("cluster mode needs a database every replica shares: pass --database-url (PostgreSQL)")
		}
		return nil, nil
	}
	if cfg.NATS != "" && cfg.Store.DatabaseURL == "" {
		return nil, errors.New("cluster mode needs PostgreSQL (--database-url): replicas on other machines cannot share a SQLite file, and PostgreSQL is what tells each replica of the others' revocations and registrations")
	}
	where := filepath.Join(cfg.Store.DataDir, store.SQLiteFile)
	_, statErr := os.Stat(where)
	created := cfg.Store.DatabaseURL == "" && errors.Is(statErr, fs.ErrNotExist)
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	if cfg.Store.DatabaseURL != "" {
		where = redactDatabaseURL(cfg.Store.DatabaseURL)
	}
	version, err := st.SchemaVersion(ctx)
	if err != nil {
		_ = st.Close() // the error that matters is err
		return nil, err
	}
	logger.Info("store open", "backend", string(st.Backend()), "at", where, "schema", version, "identity", st.Identity().ID)
	if created {
		// After a restart this is the one sign that the gateway's database
		// was removed: every token it issued is unknown from now on.
		logger.Warn("store created: a new, empty database (no tokens, no history); if this gateway kept a database before, it was moved or removed", "at", where)
	}
	return st, nil
}

// DefaultHistoryRetention is how long the fleet's thread history and the
// audit log are kept when Options.HistoryRetention is zero.
const DefaultHistoryRetention = 90 * 24 * time.Hour

// pruneEvery is how often history past its retention is deleted: it only
// needs to keep the database from growing without bound, not to be exact.
const pruneEvery = time.Hour

// pruneHistory deletes history older than retention (0: the default) at
// start and every pruneEvery until ctx ends. In a cluster every replica
// prunes; the deletes are idempotent, so that costs only a few queries.
func pruneHistory(ctx context.Context, st store.Store, retention time.Duration, logger *slog.Logger) {
	if retention <= 0 {
		retention = DefaultHistoryRetention
	}
	tick := time.NewTicker(pruneEvery)
	defer tick.Stop()
	for {
		res, err := st.Prune(ctx, time.Now().Add(-retention))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			logger.Warn("pruning history", "err", err)
		case res.Threads+res.Machines+res.Audit+res.Notifications > 0:
			logger.Info("pruned history", "threads", res.Threads, "machines", res.Machines, "audit_entries", res.Audit,
				"notifications", res.Notifications, "retention", retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// newCluster builds this replica's cluster membership. The advertised
// address and the replica id default to the listening address, with the
// host name when it listens on every interface.
func newCluster(addr net.Addr, cfg Config, logger *slog.Logger) (*cluster.Cluster, error) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = hostname
	}
	advertise, replicaID := cfg.Advertise, cfg.ReplicaID
	if advertise == "" {
		advertise = "http://" + net.JoinHostPort(host, port)
	}
	if replicaID == "" {
		replicaID = net.JoinHostPort(hostname, port)
	}
	var untrusted *slog.Logger // the cluster's Logger, unless Run limits them
	var errorLog *log.Logger
	if cfg.Options.limited != nil {
		untrusted = cfg.Options.limited.Logger()
		errorLog = cfg.Options.limited.StdLogger(slog.LevelWarn)
	}
	// The durations as given, not New's defaults: cluster.New has its own.
	heartbeat, requestTimeout := cfg.Options.Heartbeat, cfg.Options.RequestTimeout
	return cluster.New(cluster.Options{
		NATS: cfg.NATS, ReplicaID: replicaID, Advertise: advertise, Key: cfg.SigningKey,
		// Presence is repeated every heartbeat, at most every 5 s, so a dead
		// replica's connectors show offline within 15 s.
		Interval: min(heartbeat, maxClusterInterval), ResponseHeaderTimeout: requestTimeout, Logger: logger, UntrustedLogger: untrusted,
		ErrorLog: errorLog, Streams: cfg.Options.streams,
	})
}

// dsnPassword finds the password of a keyword/value connection string.
var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactDatabaseURL hides the password of a PostgreSQL URL or
// keyword/value connection string for the logs.
func redactDatabaseURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" {
		return dsnPassword.ReplaceAllString(u.Redacted(), "${1}xxxxx")
	}
	return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
}

// redactURL hides a password in a NATS URL for the logs.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}
