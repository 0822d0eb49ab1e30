// Command uncaged-gateway is the hosted gateway: it authenticates
// connectors and dashboard users, tracks which connectors are online, and
// proxies the dashboard's API calls to the named connector's tunnel.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/gateway/server"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/web"
	"github.com/uncaged/workflow/shared/envflag"
	"github.com/uncaged/workflow/shared/gctune"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/profiling"
	"github.com/uncaged/workflow/shared/tunnel"
	"github.com/uncaged/workflow/shared/version"
)

func main() {
	stopProfile := profiling.Start()
	root := newRoot()
	err := root.Execute()
	stopProfile()
	if err != nil {
		if !errors.As(err, new(loggedError)) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// loggedError is an error the command has logged already: main exits 1
// without printing it again, as a plain line among the log's JSON ones.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// envPrefix starts the name of every variable that configures the gateway.
const envPrefix = "UNCAGED_GATEWAY_"

// logFlags are the root's --log-level and --log-format; logOptions is
// what they parse to before any command runs. A command run without the
// root (in tests) logs at info, as text on a terminal and JSON otherwise.
var (
	logFlags   logging.Flags
	logOptions logging.Options
)

// newRoot is the command tree.
func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "uncaged-gateway", Short: "the uncaged-workflow gateway", SilenceUsage: true, SilenceErrors: true}
	logFlags.Register(root.PersistentFlags(), envPrefix)
	// Flags bound to variables take them here, once the command line is
	// parsed and before any command runs.
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := fromEnv(cmd, args); err != nil {
			return err
		}
		logOptions = logFlags.Options()
		return nil
	}
	root.AddCommand(serveCmd(), tokenCmd(), triggerCmd(), keyCmd(), statusCmd(), versionCmd())
	return root
}

// fromEnv is the one place the gateway reads its configuration from the
// environment: every flag bound with envflag.Bind and not given on the
// command line takes its variable. The root runs it before any command;
// the commands with bound flags also run it as their PreRunE, so that they
// read their variables when run without the root, as their tests do.
func fromEnv(cmd *cobra.Command, _ []string) error {
	return envflag.Apply(cmd.Flags(), os.Getenv)
}

// keyFlags are the signing key's flags, on every command that needs it.
type keyFlags struct{ key, file string }

func (k *keyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.file, "key-file", "", "file holding the token signing key; wins over --key")
	cmd.Flags().StringVar(&k.key, "key", "", "the token signing key, base64 or raw (prefer --key-file or the variable: arguments show in the process list)")
	envflag.Bind(cmd.Flags(), "key-file", envPrefix+"KEY_FILE")
	envflag.Bind(cmd.Flags(), "key", envPrefix+"KEY")
}

// load reads the key. auth.LoadKey looks at UNCAGED_GATEWAY_KEY only when
// there is no file; the --key flag, which fromEnv filled from that
// variable, stands in for the environment.
func (k *keyFlags) load() ([]byte, error) {
	return auth.LoadKey(k.file, func(string) string { return k.key })
}

func authority(k *keyFlags, sharedSecret string) (*auth.Authority, error) {
	key, err := k.load()
	if err != nil {
		return nil, err
	}
	return auth.New(key, sharedSecret)
}

func serveCmd() *cobra.Command {
	var listen, natsURL, advertise, replicaID string
	var key keyFlags
	var storage storeFlags
	var sharedSecret, sharedSecretFile, metricsToken, metricsTokenFile string
	var heartbeat, requestTimeout, bodyTimeout, idleTimeout, historyRetention time.Duration
	var maxBody, wsReadLimit int64
	var maxConcurrent, connectBurst, maxConnsPerIP, maxConns, maxThreadsPerMachine int
	var maxBytesPerMachine, spoolMemory, spoolDisk int64
	var spoolDir string
	var rebalanceEvery time.Duration
	var connectRate float64
	var trustedProxy, allowOrigin, legacyURLAllow []string
	var notifying notifyFlags
	cmd := &cobra.Command{
		Use:     "serve [--listen ADDR] [--key-file FILE]",
		Short:   "Run the gateway",
		Args:    cobra.NoArgs,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.Start()
			secret, err := envflag.ReadSecret(sharedSecret, sharedSecretFile)
			if err != nil {
				return fmt.Errorf("--shared-secret-file: %w", err)
			}
			metrics, err := envflag.ReadSecret(metricsToken, metricsTokenFile)
			if err != nil {
				return fmt.Errorf("--metrics-token-file: %w", err)
			}
			trusted, err := server.ParseTrustedProxies(trustedProxy)
			if err != nil {
				return fmt.Errorf("--trusted-proxy: %w", err)
			}
			origins, err := server.ParseAllowedOrigins(allowOrigin)
			if err != nil {
				return fmt.Errorf("--allow-origin: %w", err)
			}
			urlAllow, err := legacy.ParseAllowList(legacyURLAllow)
			if err != nil {
				return err // names the flag
			}
			notifyConfig, err := notifying.config()
			if err != nil {
				return err // names the flag
			}
			publicURL, err := notify.ParsePublicURL(notifying.publicURL) // config checked it
			if err != nil {
				return fmt.Errorf("--public-url: %w", err)
			}
			if wsReadLimit > 0 && wsReadLimit < tunnel.MaxMessage {
				return fmt.Errorf("--ws-read-limit must be at least %d bytes: tunnels send WebSocket messages up to that size", tunnel.MaxMessage)
			}
			a, err := authority(&key, secret)
			if err != nil {
				return err
			}
			storeConfig, err := storage.config()
			if err != nil {
				return err
			}
			if maxThreadsPerMachine <= 0 || maxBytesPerMachine <= 0 {
				return fmt.Errorf("--max-threads-per-machine and --max-bytes-per-machine must be positive (got %d and %d)", maxThreadsPerMachine, maxBytesPerMachine)
			}
			storeConfig.MaxThreadsPerMachine, storeConfig.MaxBytesPerMachine = maxThreadsPerMachine, maxBytesPerMachine
			if spoolMemory <= 0 || spoolDisk <= 0 {
				return fmt.Errorf("--spool-memory and --spool-disk must be positive (got %d and %d)", spoolMemory, spoolDisk)
			}
			if rebalanceEvery <= 0 {
				rebalanceEvery = -1 // the flag's 0 is never; the option's is the default
			}
			if spoolDir == "" {
				spoolDir = defaultSpoolDir(storeConfig)
			}
			signingKey, err := key.load()
			if err != nil {
				return err
			}
			// One line per request: through a queue, not a system call each.
			logQueue := logging.NewQueue(os.Stderr)
			defer logQueue.Close()
			logger := logOptions.NewQueued(logQueue)
			a.SetLogger(logger)
			if len(origins) > 0 {
				logger.Info("dashboards on other origins may call the API with a token", "origins", origins)
			}
			if urlAllow != nil {
				logger.Warn("original clients registered with a URL are fetched: the gateway makes requests to the hosts listed", "legacy_url_allow", urlAllow.String())
			}
			// For token commands that use another database (running.go).
			if release, err := recordRunning(storeConfig, listen); err != nil {
				logger.Warn("cannot record this gateway among those running on this machine: token commands using another database will not name this one", "err", err.Error())
			} else {
				defer release()
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			err = server.Run(ctx, server.Config{
				Options: server.Options{
					Auth: a, Heartbeat: heartbeat, Logger: logger, RequestTimeout: requestTimeout,
					MaxBody: maxBody, WSReadLimit: wsReadLimit, MaxConcurrent: maxConcurrent,
					ConnectRate: connectRate, ConnectBurst: connectBurst,
					BodyTimeout: bodyTimeout, IdleTimeout: idleTimeout, MaxConnsPerIP: maxConnsPerIP, MaxConns: maxConns, TrustedProxies: trusted,
					MetricsToken: metrics, HistoryRetention: historyRetention,
					Dashboard: web.Handler(), AllowOrigins: origins, LegacyURLAllow: urlAllow,
					SpoolDir: spoolDir, SpoolMemory: spoolMemory, SpoolDisk: spoolDisk,
					RebalanceEvery: rebalanceEvery, Notify: notifyConfig, PublicURL: publicURL,
				},
				Store:  storeConfig,
				Listen: listen, TrustedProxiesGiven: trustedProxy,
				NATS: natsURL, Advertise: advertise, ReplicaID: replicaID, SigningKey: signingKey,
				StandardLog: true,
			})
			var stopErr *server.StopError
			switch {
			case err == nil:
				return nil
			case !errors.As(err, &stopErr): // a stop's error is in "gateway stopped"
				logger.Error("gateway failed", "err", err.Error())
			}
			return loggedError{err}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":8080", "address to listen on")
	key.register(cmd)
	cmd.Flags().StringVar(&sharedSecretFile, "shared-secret-file", "", "file holding the shared secret; wins over --shared-secret")
	cmd.Flags().StringVar(&sharedSecret, "shared-secret", "", "secret connectors and dashboard users may present instead of a token, as the original's were (default: none; prefer the file or the variable)")
	cmd.Flags().StringVar(&metricsTokenFile, "metrics-token-file", "", "file holding the metrics token; wins over --metrics-token")
	cmd.Flags().StringVar(&metricsToken, "metrics-token", "", "bearer token /metrics asks for (default: none, /metrics is open; prefer the file or the variable)")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", 15*time.Second, "ping interval; a connector missing two pings is offline")
	cmd.Flags().DurationVar(&requestTimeout, "request-timeout", server.DefaultRequestTimeout, "timeout of a proxied request that is not a stream")
	cmd.Flags().Int64Var(&maxBody, "max-body", server.DefaultMaxBody, "largest proxied request body, in bytes")
	cmd.Flags().Int64Var(&wsReadLimit, "ws-read-limit", server.DefaultWSReadLimit, "largest WebSocket message from a connector, in bytes")
	cmd.Flags().IntVar(&maxConcurrent, "max-concurrent", server.DefaultMaxConcurrent, "proxied requests in flight per connector (negative: no limit)")
	cmd.Flags().Float64Var(&connectRate, "connect-rate", server.DefaultConnectRate, "connection attempts per minute per IP (negative: no limit)")
	cmd.Flags().IntVar(&connectBurst, "connect-burst", server.DefaultConnectBurst, "burst of connection attempts per IP")
	cmd.Flags().DurationVar(&bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time a request body may take to arrive, on every route; streams send none")
	cmd.Flags().DurationVar(&idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "time a keep-alive connection may wait for its next request")
	cmd.Flags().IntVar(&maxConnsPerIP, "max-conns-per-ip", server.DefaultMaxConnsPerIP, "connections one client address (an IPv6 /64) may hold open; trusted proxies exempt (negative: no limit)")
	cmd.Flags().IntVar(&maxConns, "max-conns", 0, "connections open at once, all clients together; past it the one waiting longest on its client is closed to make room (0: the open-files limit less an eighth, at least 64, kept for the gateway itself; negative: no limit)")
	envflag.DocDefault(cmd.Flags(), "max-conns", "from the open-files limit (`ulimit -n`)")
	cmd.Flags().IntVar(&maxThreadsPerMachine, "max-threads-per-machine", store.DefaultMaxThreadsPerMachine, "threads of one machine the fleet's history keeps; past it its oldest are forgotten")
	cmd.Flags().Int64Var(&maxBytesPerMachine, "max-bytes-per-machine", store.DefaultMaxBytesPerMachine, "bytes of the store one machine's threads may take (their text, and 256 a thread for the rest); past it its oldest are forgotten")
	cmd.Flags().StringArrayVar(&trustedProxy, "trusted-proxy", nil, "CIDR or address of a reverse proxy whose X-Forwarded-For, X-Real-IP and X-Forwarded-Proto are believed; repeatable (the variable: comma-separated; default: none, the peer address is the client's)")
	cmd.Flags().StringArrayVar(&allowOrigin, "allow-origin", nil, "origin (scheme://host[:port], or *) of a dashboard hosted elsewhere whose pages may call the API with a bearer token, never with the session cookie; repeatable (the variable: comma-separated; default: none, the gateway's own origin only)")
	cmd.Flags().StringArrayVar(&legacyURLAllow, "legacy-url-allow", nil, "host name (*.example.com for its subdomains), address or CIDR an original client registered with a URL may be fetched at; checked on the address dialed, a name reaches public addresses only; repeatable (the variable: comma-separated; default: none, registered URLs are never fetched)")
	storage.register(cmd)
	notifying.register(cmd)
	cmd.Flags().DurationVar(&historyRetention, "history-retention", server.DefaultHistoryRetention, "how long the fleet's thread history and the audit log are kept")
	cmd.Flags().StringVar(&spoolDir, "spool-dir", "", "directory where what the gateway writes to its store (audit entries, the fleet's threads, last-seen times) waits while the store does not answer, past --spool-memory; a gateway started on it writes what it finds there first. Keep it on a volume that outlives the container; replicas sharing one take a file each")
	envflag.DocDefault(cmd.Flags(), "spool-dir", "`spool` in --data-dir when one is given, else `uncaged-gateway-spool` in the temporary directory")
	cmd.Flags().DurationVar(&rebalanceEvery, "rebalance-every", server.DefaultRebalanceEvery, "cluster mode: how often a replica holding more than its share of the connectors asks a few to move to the others; 0 never")
	cmd.Flags().Int64Var(&spoolMemory, "spool-memory", server.DefaultSpoolMemory, "bytes of records waiting for the store kept in memory; past it the oldest spill to --spool-dir")
	cmd.Flags().Int64Var(&spoolDisk, "spool-disk", server.DefaultSpoolDisk, "bytes the spill file in --spool-dir may take; past it and memory, records are dropped and counted")
	cmd.Flags().StringVar(&natsURL, "nats", "", "NATS URL: run as one replica of a cluster")
	cmd.Flags().StringVar(&advertise, "cluster-advertise", "", "http://host:port where the other replicas reach this one (default: the listen address)")
	cmd.Flags().StringVar(&replicaID, "replica-id", "", "this replica's name in the cluster (default: hostname:port)")
	// Every serve flag but the tuning ones reads UNCAGED_GATEWAY_<FLAG>
	// when not given; the shared secret also its original name.
	for _, name := range []string{"listen", "body-timeout", "idle-timeout", "max-conns-per-ip", "max-conns", "max-threads-per-machine", "max-bytes-per-machine", "trusted-proxy", "allow-origin", "legacy-url-allow",
		"nats", "cluster-advertise", "replica-id", "history-retention", "spool-dir", "spool-memory", "spool-disk", "rebalance-every",
		"shared-secret-file", "metrics-token", "metrics-token-file"} {
		envflag.Bind(cmd.Flags(), name, envName(name))
	}
	envflag.Bind(cmd.Flags(), "shared-secret", envName("shared-secret"), "WORKFLOW_DASHBOARD_SECRET")
	return cmd
}

// defaultSpoolDir is where the store's queue spills when --spool-dir is
// not given: beside the SQLite database (or in --data-dir, given with a
// PostgreSQL URL), else the temporary directory, which outlives a crash
// of the process but maybe not of its container.
func defaultSpoolDir(cfg store.Config) string {
	if cfg.DataDir != "" {
		return filepath.Join(cfg.DataDir, "spool")
	}
	return filepath.Join(os.TempDir(), "uncaged-gateway-spool")
}

// defaultDataDir is where the SQLite database lives when no flag or
// variable says: beside the connector's own ~/.uncaged/workflow.
func defaultDataDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --data-dir given and no home directory to default to: %w", err)
	}
	return filepath.Join(home, ".uncaged", "gateway"), nil
}

// envName is flag name's variable: UNCAGED_GATEWAY_<NAME>, upper case,
// '-' as '_'. The prefix is spelled out rather than envPrefix because the
// deploy tests read this source to learn which variables the gateway
// reads.
func envName(name string) string {
	return "UNCAGED_GATEWAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func keyCmd() *cobra.Command {
	gen := &cobra.Command{
		Use:   "generate",
		Short: "Print a new random signing key (base64)",
		Args:  cobra.NoArgs,
		Run:   func(*cobra.Command, []string) { fmt.Println(auth.GenerateKey()) },
	}
	k := &cobra.Command{Use: "key", Short: "Manage the signing key"}
	k.AddCommand(gen)
	return k
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			v := version.Current()
			fmt.Printf("uncaged-gateway %s %s\n", v.Version, v.GoVersion)
		},
	}
}
