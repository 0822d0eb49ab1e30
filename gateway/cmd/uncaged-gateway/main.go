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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/server"
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
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

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
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := envflag.Apply(cmd.Flags(), os.Getenv); err != nil {
			return err
		}
		logOptions = logFlags.Options()
		return nil
	}
	root.AddCommand(serveCmd(), tokenCmd(), keyCmd(), statusCmd(), versionCmd())
	return root
}

func authority(keyFile string) (*auth.Authority, error) {
	key, err := auth.LoadKey(keyFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	return auth.New(key, os.Getenv("WORKFLOW_DASHBOARD_SECRET"))
}

func serveCmd() *cobra.Command {
	var listen, keyFile, natsURL, advertise, replicaID string
	var heartbeat, requestTimeout, bodyTimeout, idleTimeout time.Duration
	var maxBody, wsReadLimit int64
	var maxConcurrent, connectBurst, maxConnsPerIP int
	var connectRate float64
	var trustedProxy []string
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--key-file FILE]",
		Short: "Run the gateway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.Start()
			if !cmd.Flags().Changed("listen") {
				if env := os.Getenv("UNCAGED_GATEWAY_LISTEN"); env != "" {
					listen = env
				}
			}
			for flag, env := range map[string]*string{"nats": &natsURL, "cluster-advertise": &advertise, "replica-id": &replicaID} {
				if !cmd.Flags().Changed(flag) {
					if v := os.Getenv("UNCAGED_GATEWAY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))); v != "" {
						*env = v
					}
				}
			}
			if err := flagsFromEnv(cmd, envFlags...); err != nil {
				return err
			}
			trusted, err := server.ParseTrustedProxies(trustedProxy)
			if err != nil {
				return fmt.Errorf("--trusted-proxy: %w", err)
			}
			if wsReadLimit > 0 && wsReadLimit < tunnel.MaxMessage {
				return fmt.Errorf("--ws-read-limit must be at least %d bytes: tunnels send WebSocket messages up to that size", tunnel.MaxMessage)
			}
			a, err := authority(keyFile)
			if err != nil {
				return err
			}
			var clusterKey []byte
			if natsURL != "" {
				if clusterKey, err = auth.LoadKey(keyFile, os.Getenv); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return server.Run(ctx, server.Config{
				Options: server.Options{
					Auth: a, Heartbeat: heartbeat, Logger: logOptions.New(os.Stderr), RequestTimeout: requestTimeout,
					MaxBody: maxBody, WSReadLimit: wsReadLimit, MaxConcurrent: maxConcurrent,
					ConnectRate: connectRate, ConnectBurst: connectBurst,
					BodyTimeout: bodyTimeout, IdleTimeout: idleTimeout, MaxConnsPerIP: maxConnsPerIP, TrustedProxies: trusted,
					MetricsToken: os.Getenv("UNCAGED_GATEWAY_METRICS_TOKEN"),
					Dashboard:    web.Handler(),
				},
				Listen: listen, TrustedProxiesGiven: trustedProxy,
				NATS: natsURL, Advertise: advertise, ReplicaID: replicaID, ClusterKey: clusterKey,
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":8080", "address to listen on (env UNCAGED_GATEWAY_LISTEN)")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "file holding the token signing key (env UNCAGED_GATEWAY_KEY)")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", 15*time.Second, "ping interval; a connector missing two pings is offline")
	cmd.Flags().DurationVar(&requestTimeout, "request-timeout", server.DefaultRequestTimeout, "timeout of a proxied request that is not a stream")
	cmd.Flags().Int64Var(&maxBody, "max-body", server.DefaultMaxBody, "largest proxied request body, in bytes")
	cmd.Flags().Int64Var(&wsReadLimit, "ws-read-limit", server.DefaultWSReadLimit, "largest WebSocket message from a connector, in bytes")
	cmd.Flags().IntVar(&maxConcurrent, "max-concurrent", server.DefaultMaxConcurrent, "proxied requests in flight per connector (negative: no limit)")
	cmd.Flags().Float64Var(&connectRate, "connect-rate", server.DefaultConnectRate, "connection attempts per minute per IP (negative: no limit)")
	cmd.Flags().IntVar(&connectBurst, "connect-burst", server.DefaultConnectBurst, "burst of connection attempts per IP")
	cmd.Flags().DurationVar(&bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time a request body may take to arrive, on every route; streams send none (env UNCAGED_GATEWAY_BODY_TIMEOUT)")
	cmd.Flags().DurationVar(&idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "time a keep-alive connection may wait for its next request (env UNCAGED_GATEWAY_IDLE_TIMEOUT)")
	cmd.Flags().IntVar(&maxConnsPerIP, "max-conns-per-ip", server.DefaultMaxConnsPerIP, "connections one client address may hold open; trusted proxies exempt (negative: no limit; env UNCAGED_GATEWAY_MAX_CONNS_PER_IP)")
	cmd.Flags().StringArrayVar(&trustedProxy, "trusted-proxy", nil, "CIDR or address of a reverse proxy whose X-Forwarded-For, X-Real-IP and X-Forwarded-Proto are believed; repeatable (env UNCAGED_GATEWAY_TRUSTED_PROXY, comma-separated; default: none, the peer address is the client's)")
	cmd.Flags().StringVar(&natsURL, "nats", "", "NATS URL: run as one replica of a cluster (env UNCAGED_GATEWAY_NATS)")
	cmd.Flags().StringVar(&advertise, "cluster-advertise", "", "http://host:port where the other replicas reach this one (default: the listen address; env UNCAGED_GATEWAY_CLUSTER_ADVERTISE)")
	cmd.Flags().StringVar(&replicaID, "replica-id", "", "this replica's name in the cluster (default: hostname:port; env UNCAGED_GATEWAY_REPLICA_ID)")
	return cmd
}

// envFlags are the serve flags that also read UNCAGED_GATEWAY_<FLAG>
// when not given on the command line.
var envFlags = []string{"body-timeout", "idle-timeout", "max-conns-per-ip", "trusted-proxy"}

// flagsFromEnv sets each named flag not given on the command line from
// its variable UNCAGED_GATEWAY_<NAME> (upper case, '-' as '_'), parsed as
// the flag would parse it.
func flagsFromEnv(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		env := "UNCAGED_GATEWAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		v := os.Getenv(env)
		if v == "" || cmd.Flags().Changed(name) {
			continue
		}
		if err := cmd.Flags().Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	return nil
}

func tokenCmd() *cobra.Command {
	var connector, keyFile string
	var dashboard bool
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create --connector NAME | --dashboard [--ttl DURATION]",
		Short: "Issue a token signed with the gateway's key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (connector == "") == !dashboard {
				return errors.New("give exactly one of --connector NAME or --dashboard")
			}
			a, err := authority(keyFile)
			if err != nil {
				return err
			}
			role := auth.RoleDashboard
			if connector != "" {
				role = auth.RoleConnector
			}
			tok, err := a.Issue(role, connector, ttl)
			if err != nil {
				return err
			}
			fmt.Println(tok)
			return nil
		},
	}
	create.Flags().StringVar(&connector, "connector", "", "issue a connector token bound to this name")
	create.Flags().BoolVar(&dashboard, "dashboard", false, "issue a dashboard token")
	create.Flags().DurationVar(&ttl, "ttl", 0, "validity (0: no expiry)")
	create.Flags().StringVar(&keyFile, "key-file", "", "file holding the signing key (env UNCAGED_GATEWAY_KEY)")
	tok := &cobra.Command{Use: "token", Short: "Manage tokens"}
	tok.AddCommand(create)
	return tok
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
