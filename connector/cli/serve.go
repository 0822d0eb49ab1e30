package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/envflag"
	"github.com/uncaged/workflow/shared/gctune"
)

// runEngine makes sure threads of l can run while this command lives: it
// becomes the root's engine host, or uses the one already running. It
// returns when the host is up; stop ends a host it started.
func (a *app) runEngine(ctx context.Context, l storage.Layout, logger *slog.Logger) (stop func(), err error) {
	h, err := host.Open(host.Options{Layout: l, Load: a.workflowLoader(l), Getenv: os.Getenv, Logger: logger})
	if errors.Is(err, host.ErrHostRunning) {
		fmt.Fprintln(a.env.Stderr, "using the engine host already running for "+l.Root)
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- h.Serve(hctx) }()
	// Wait until it answers, so the API's first request finds it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := host.Dial(l); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-served:
			cancel()
			if err == nil {
				err = errors.New("stopped before it answered")
			}
			return nil, fmt.Errorf("engine host did not start: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			if err := <-served; err != nil {
				return nil, fmt.Errorf("engine host did not start: %w", err)
			}
			return nil, errors.New("engine host did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return func() {
		cancel()
		if err := <-served; err != nil {
			logger.Error("engine host stopped", "err", err)
		}
	}, nil
}

// startAPI is what connect and serve share: a context
// that ends on SIGINT/SIGTERM, the engine, and the REST API over them. stop
// ends the engine host if this process started it.
func (a *app) startAPI() (ctx context.Context, logger *slog.Logger, handler http.Handler, stop func(), err error) {
	if a.origins, err = api.ParseOrigins(a.allowOrigin); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("--allow-origin: %w", err)
	}
	gctune.Start()
	l, err := a.layout()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// At info, the default, one line per API request (connector/api
	// requestlog.go) besides the engine host's own events.
	logger = a.logger()
	stopEngine, err := a.runEngine(ctx, l, logger)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, err
	}
	return ctx, logger, a.apiHandler(l, logger), func() { stopEngine(); cancel() }, nil
}

// apiHandler is the connector's REST API over the storage root.
func (a *app) apiHandler(l storage.Layout, logger *slog.Logger) http.Handler {
	return api.New(api.Options{Layout: l, Engine: api.NewHostEngine(l, spawnEngine(l)), Logger: logger, AllowOrigins: a.origins})
}

// listen serves h on addr until the returned stop is called.
func (a *app) listen(addr string, h http.Handler) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: localOnly(h, a.origins), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			a.logger().Error("API server stopped", "err", err)
		}
	}()
	fmt.Fprintf(a.out(), "API listening on http://%s\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			// Requests still open when the grace period ran out (a live
			// stream, say); the server stops all the same.
			a.logger().Warn("API server: shutting down", "err", err)
		}
	}, nil
}

// localOnly guards the API on a local port, which has no credentials,
// from the web pages its user visits. A page elsewhere may send requests
// it cannot read the answers of — a text/plain POST /api/threads starts a
// thread with the page's prompt — so a browser's request from a page of
// an origin not in origins (--allow-origin; none by default) is refused:
// one whose Origin header names another, and one from another site's page
// (Sec-Fetch-Site) that names none. A page on a name the attacker
// re-points at this machine (DNS rebinding) is same-origin and could read
// answers too, so a browser's request (it says where it comes from in
// Sec-Fetch-Site) must name an IP address or localhost; other clients, a
// Prometheus scraping a host name among them, may name any host.
func localOnly(h http.Handler, origins api.Origins) http.Handler {
	refuse := func(w http.ResponseWriter, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		// A refused client that cannot be written to has no one better to tell.
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")
		if (origin != "" || site == "cross-site" || site == "same-site") && !origins.Admits(origin) {
			from := "a page that names no origin"
			if origin != "" {
				from = "pages of " + origin
			}
			refuse(w, "cross-origin request refused: "+from+" may not use this API (--allow-origin admits an origin)")
			return
		}
		host := r.Host
		if name, _, err := net.SplitHostPort(host); err == nil {
			host = name
		}
		if site != "" && host != "localhost" && net.ParseIP(strings.Trim(host, "[]")) == nil {
			refuse(w, "host "+r.Host+" refused: reach the local API by IP address or localhost")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// addAllowOriginFlag gives a command that serves the API its
// --allow-origin.
func (a *app) addAllowOriginFlag(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&a.allowOrigin, "allow-origin", nil,
		"origin (scheme://host[:port]) of a web page that may call this API, e.g. the dashboard's dev server http://localhost:5173; "+
			"repeatable (the variable: comma-separated; default: none, no web page may)")
	envflag.Bind(cmd.Flags(), "allow-origin", EnvPrefix+"ALLOW_ORIGIN")
}

func (a *app) serveCmd() *cobra.Command {
	var listen, memoryBudget string
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--memory-budget SIZE]",
		Short: "Serve the REST API locally (no gateway)",
		Args:  exactArgs(0, 0, "", "serve takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := setupMemory(memoryBudget, a.logger()); err != nil {
				return err
			}
			ctx, _, handler, stop, err := a.startAPI()
			if err != nil {
				return err
			}
			defer stop()
			stopHTTP, err := a.listen(listen, handler)
			if err != nil {
				return err
			}
			<-ctx.Done()
			stopHTTP()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7860", "address to serve the API on")
	a.addAllowOriginFlag(cmd)
	addMemoryBudgetFlag(cmd, &memoryBudget)
	return cmd
}
