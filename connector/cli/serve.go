package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/envflag"
	"github.com/uncaged/workflow/shared/gctune"
	"github.com/uncaged/workflow/shared/logging"
)

// The engine host is never this process: connect and serve use the
// root's detached host, as run does (spawnEngine), so that stopping them
// never stops a thread. A host is started when a thread first needs one;
// `uncaged-workflow engine stop` stops it.

// hostFlags checks the flags connect and serve share — --allow-origin,
// and --memory-budget, which becomes the arguments of the engine host
// they start — before anything is made.
func (a *app) hostFlags(memoryBudget string) (hostArgs []string, err error) {
	if a.origins, err = api.ParseOrigins(a.allowOrigin); err != nil {
		return nil, fmt.Errorf("--allow-origin: %w", err)
	}
	if memoryBudget == "" {
		return nil, nil
	}
	if _, err := membudget.ParseSize(memoryBudget); err != nil {
		return nil, fmt.Errorf("--memory-budget: %w", err)
	}
	return []string{"--memory-budget", memoryBudget}, nil
}

// startAPI is what connect and serve share once their flags are checked
// (hostFlags): a context that ends on SIGINT/SIGTERM, and the REST API
// over the root, whose threads run in the root's engine host; one it
// starts gets hostArgs.
func (a *app) startAPI(out *apiOutput, hostArgs []string) (ctx context.Context, l storage.Layout, handler http.Handler, stop func(), err error) {
	gctune.Start()
	if l, err = a.layout(); err != nil {
		return nil, l, nil, nil, err
	}
	if len(hostArgs) > 0 {
		if c, err := host.Dial(l); err == nil {
			if st, err := c.Status(); err == nil {
				out.warn(fmt.Sprintf("%s applies to an engine host this command starts; the one running for %s (pid %d) keeps its own budget until it stops (`uncaged-workflow engine stop`)",
					strings.Join(hostArgs, " "), l.Root, st.PID))
			}
			c.Close()
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return ctx, l, a.apiHandler(l, out.logger, hostArgs...), cancel, nil
}

// apiHandler is the connector's REST API over the storage root; a host
// it starts gets hostArgs.
func (a *app) apiHandler(l storage.Layout, logger *slog.Logger, hostArgs ...string) http.Handler {
	return api.New(api.Options{Layout: l, Engine: api.NewHostEngine(l, spawnEngine(l, hostArgs...)), Logger: logger, AllowOrigins: a.origins})
}

// threadsLeft says what stopping connect or serve left running: the
// threads in the root's engine host, which go on without them.
func threadsLeft(l storage.Layout) string {
	c, err := host.Dial(l)
	if err != nil {
		return "no threads running"
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		return "no threads running"
	}
	list, err := c.List()
	if err != nil || len(list) == 0 {
		return "no threads running"
	}
	paused := 0
	for _, r := range list {
		if r.Status == threads.StatusPaused {
			paused++
		}
	}
	one := len(list) == 1
	what := fmt.Sprintf("%s %s running in the engine host (pid %d)", plural(len(list), "thread"), pick(one, "keeps", "keep"), st.PID)
	if paused > 0 {
		which := pick(one, "paused", fmt.Sprintf("%d of them paused", paused))
		what = fmt.Sprintf("%s %s in the engine host (pid %d), %s", plural(len(list), "thread"), pick(one, "stays", "stay"), st.PID, which)
	}
	return what + "; `uncaged-workflow engine stop` stops it"
}

// pick is one when cond holds, else other.
func pick(cond bool, one, other string) string {
	if cond {
		return one
	}
	return other
}

// apiOutput is how connect and serve write what they have to say, one
// rule for all of it, so that their output is of one kind: with
// --log-format json (or its variable) every line is a JSON log record on
// standard error — the state lines, the refusals and the log itself;
// otherwise every line is text, on a terminal or not: the state lines on
// standard output, refusals and the log (key=value) on standard error.
type apiOutput struct {
	json   bool
	logger *slog.Logger
	stdout io.Writer // the state lines
	stderr io.Writer
}

// apiOutput decides the rule for this command; call it before anything
// logs.
func (a *app) apiOutput() *apiOutput {
	if a.log.Format == logging.FormatAuto {
		a.log.Format = logging.FormatText
	}
	o := &apiOutput{json: a.log.Format == logging.FormatJSON, logger: a.logger(), stdout: a.out(), stderr: a.env.Stderr}
	if o.json {
		o.stdout = &lineLogger{log: o.logger}
	}
	return o
}

// say writes one state line.
func (o *apiOutput) say(line string) { fmt.Fprintln(o.stdout, line) }

// warn writes one warning.
func (o *apiOutput) warn(line string) {
	if o.json {
		o.logger.Warn(line)
		return
	}
	fmt.Fprintln(o.stderr, "warning: "+line)
}

// stopped ends the command with an error: a failure retrying cannot cure
// (*link.PermanentError) with its exit code, anything else with 1, said
// once, on standard error (or in the log).
func (o *apiOutput) stopped(cmd string, err error) error {
	var perm *link.PermanentError
	if !errors.As(err, &perm) {
		if !o.json {
			return err // Run prints it
		}
		o.logger.Error(cmd+" stopped", "err", err.Error(), "exitCode", 1)
		return exitError{1}
	}
	code := connectExitCode(perm.Kind)
	const why = "retrying cannot fix this; `uncaged-workflow connect --help` lists the exit codes"
	if o.json {
		o.logger.Error(perm.Message, "exitCode", code, "stopped", why)
	} else {
		fmt.Fprintf(o.stderr, "%s: %s\n%s: stopped (exit %d): %s\n", cmd, perm.Message, cmd, code, why)
	}
	return exitError{code}
}

// lineLogger logs each line written to it at info.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.log.Info(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// listen serves h on addr until the returned stop is called.
func (a *app) listen(out *apiOutput, addr string, h http.Handler) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: localOnly(h, a.origins), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			out.logger.Error("API server stopped", "err", err)
		}
	}()
	out.say(fmt.Sprintf("API listening on http://%s", ln.Addr()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			// Requests still open when the grace period ran out (a live
			// stream, say); the server stops all the same.
			out.logger.Warn("API server: shutting down", "err", err)
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
		Long: "Serves this machine's REST API on a local address. Threads run in the storage\n" +
			"root's engine host, started in the background when one is needed, as `run`\n" +
			"starts it: stopping serve leaves them running (`engine stop` stops the host).\n" +
			"Output is text unless --log-format json, which makes every line a JSON record.",
		Args: exactArgs(0, 0, "", "serve takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := a.apiOutput()
			hostArgs, err := a.hostFlags(memoryBudget)
			if err != nil {
				return out.stopped("serve", err)
			}
			ctx, l, handler, stop, err := a.startAPI(out, hostArgs)
			if err != nil {
				return out.stopped("serve", err)
			}
			defer stop()
			stopHTTP, err := a.listen(out, listen, handler)
			if err != nil {
				return out.stopped("serve", err)
			}
			<-ctx.Done()
			stopHTTP()
			out.say("stopped serving; " + threadsLeft(l))
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7860", "address to serve the API on")
	a.addAllowOriginFlag(cmd)
	addHostMemoryBudgetFlag(cmd, &memoryBudget)
	return cmd
}

// addHostMemoryBudgetFlag gives connect and serve their --memory-budget,
// which they pass to the engine host they start.
func addHostMemoryBudgetFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "memory-budget", "",
		"memory each thread's JavaScript may hold, for every thread of an engine host this command starts (a host already running keeps its own), over workflow.yaml's config.memoryBudget (e.g. 1GiB, or off; default "+membudget.FormatSize(membudget.DefaultBudget)+")")
}
