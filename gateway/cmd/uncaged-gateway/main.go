// Command uncaged-gateway is the hosted gateway: it authenticates
// connectors and dashboard users, tracks which connectors are online, and
// proxies the dashboard's API calls to the named connector's tunnel.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/server"
	"github.com/uncaged/workflow/gateway/web"
	"github.com/uncaged/workflow/shared/profiling"
	"github.com/uncaged/workflow/shared/version"
)

func main() {
	root := &cobra.Command{Use: "uncaged-gateway", Short: "the uncaged-workflow gateway", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(serveCmd(), tokenCmd(), keyCmd(), statusCmd(), versionCmd())
	stopProfile := profiling.Start()
	err := root.Execute()
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func authority(keyFile string) (*auth.Authority, error) {
	key, err := auth.LoadKey(keyFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	return auth.New(key, os.Getenv("WORKFLOW_DASHBOARD_SECRET"))
}

func serveCmd() *cobra.Command {
	var listen, keyFile string
	var heartbeat, requestTimeout time.Duration
	var maxBody, wsReadLimit int64
	var maxConcurrent, connectBurst int
	var connectRate float64
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--key-file FILE]",
		Short: "Run the gateway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("listen") {
				if env := os.Getenv("UNCAGED_GATEWAY_LISTEN"); env != "" {
					listen = env
				}
			}
			a, err := authority(keyFile)
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			g := server.New(server.Options{
				Auth: a, Heartbeat: heartbeat, Logger: logger, RequestTimeout: requestTimeout,
				MaxBody: maxBody, WSReadLimit: wsReadLimit, MaxConcurrent: maxConcurrent,
				ConnectRate: connectRate, ConnectBurst: connectBurst,
				MetricsToken: os.Getenv("UNCAGED_GATEWAY_METRICS_TOKEN"),
				Dashboard:    web.Handler(),
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			logger.Info("gateway listening", "address", ln.Addr().String(), "version", version.Version)
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			logger.Info("gateway shutting down")
			g.Shutdown()
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
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
	return cmd
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

func statusCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "status [--url URL]",
		Short: "Show the connectors a gateway knows (token from UNCAGED_DASHBOARD_TOKEN or WORKFLOW_DASHBOARD_SECRET)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok := os.Getenv("UNCAGED_DASHBOARD_TOKEN")
			if tok == "" {
				tok = os.Getenv("WORKFLOW_DASHBOARD_SECRET")
			}
			req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(url, "/")+"/api/gateway/endpoints", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("gateway answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
			}
			var eps []presence.Endpoint
			if err := json.Unmarshal(body, &eps); err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSTATUS\tLAST HEARTBEAT\tCONNECTED\tVERSION\tADDRESS")
			for _, e := range eps {
				fmt.Fprintf(w, "%s\t%s\t%s ago\t%s\t%s\t%s\n", e.Name, e.Status,
					time.Since(time.UnixMilli(e.LastHeartbeat)).Round(time.Second), time.UnixMilli(e.ConnectedAt).Format(time.RFC3339), e.Version, e.Address)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080", "the gateway")
	return cmd
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
