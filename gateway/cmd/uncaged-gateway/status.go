package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/shared/envflag"
)

// gatewayStatus is what `status --json` prints.
type gatewayStatus struct {
	URL     string `json:"url"`
	Healthy bool   `json:"healthy"`
	Ready   bool   `json:"ready"`
	// NotReady is the gateway's reason when it is not ready (stopping,
	// catching up with the other replicas, its store replaced or damaged).
	NotReady string `json:"notReady,omitempty"`
	// Store and NATS are what a ready gateway says of the dependencies it
	// shares with the other replicas: an outage of either keeps it ready.
	Store *dependencyStatus `json:"store,omitempty"`
	NATS  *dependencyStatus `json:"nats,omitempty"`
	// Endpoints is nil when no dashboard token was given.
	Endpoints []statusEndpoint `json:"endpoints"`
}

// dependencyStatus is /readyz's account of the store or of NATS.
type dependencyStatus struct {
	Status string `json:"status"`
	Since  string `json:"since,omitempty"`
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Queued counts the records waiting for the store; Peers the other
	// replicas heard from.
	Queued *int `json:"queued,omitempty"`
	Peers  *int `json:"peers,omitempty"`
}

// line is the dependency's state for a person, empty when it is fine.
func (d *dependencyStatus) line() string {
	if d == nil || d.Status == "up" || d.Status == "connected" {
		return ""
	}
	out := d.Status
	if d.Since != "" {
		out += " since " + d.Since
	}
	for _, more := range []string{d.Error, d.Detail} {
		if more != "" {
			out += ": " + more
		}
	}
	if d.Queued != nil && *d.Queued > 0 {
		out += fmt.Sprintf(" (%d records waiting)", *d.Queued)
	}
	return out
}

// statusEndpoint is the part of /api/gateway/endpoints status shows; it is
// decoded loosely so fields added later (a replica in cluster mode) show
// up without this command changing in lockstep.
type statusEndpoint struct {
	Name          string `json:"name"`
	Status        string `json:"status"`
	LastHeartbeat int64  `json:"lastHeartbeat"`
	ConnectedAt   int64  `json:"connectedAt"`
	Version       string `json:"version"`
	Address       string `json:"address"`
	Replica       string `json:"replica,omitempty"`
}

// defaultStatusURL is where a gateway on this machine listens when neither
// --url nor its variable (UNCAGED_GATEWAY_URL, bound like every flag's) says:
// the address `serve` would take from UNCAGED_GATEWAY_LISTEN (so the image's
// HEALTHCHECK follows it), else :8080.
func defaultStatusURL(getenv func(string) string) string {
	listen := getenv("UNCAGED_GATEWAY_LISTEN")
	host, port, err := net.SplitHostPort(listen)
	if listen == "" || err != nil {
		return "http://127.0.0.1:8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func statusCmd() *cobra.Command {
	var url, token, tokenFile string
	var health, asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status [--url URL] [--health] [--json]",
		Short: "Show whether a gateway is up and ready, and its connectors (with a dashboard token)",
		Long: "Exits 1 when the gateway does not answer, is not ready, or refuses the token.\n" +
			"--health checks readiness only (no token needed): the container HEALTHCHECK.",
		Args:    cobra.NoArgs,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := envflag.ReadSecret(token, tokenFile)
			if err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			base := strings.TrimSuffix(url, "/")
			s := gatewayStatus{URL: base}
			code, _, err := statusGet(ctx, base+"/healthz", "")
			if err != nil {
				return fmt.Errorf("gateway at %s does not answer: %w", base, err)
			}
			s.Healthy = code == http.StatusOK
			code, body, err := statusGet(ctx, base+"/readyz", "")
			if err != nil {
				return fmt.Errorf("gateway at %s does not answer: %w", base, err)
			}
			s.Ready = code == http.StatusOK
			if s.Ready {
				var deps struct {
					Store *dependencyStatus `json:"store"`
					NATS  *dependencyStatus `json:"nats"`
				}
				if json.Unmarshal(body, &deps) == nil {
					s.Store, s.NATS = deps.Store, deps.NATS
				}
			} else {
				var why struct{ Error string }
				if json.Unmarshal(body, &why) == nil && why.Error != "" {
					s.NotReady = why.Error
				} else {
					s.NotReady = http.StatusText(code)
				}
			}
			if health {
				if !s.Healthy || !s.Ready {
					return fmt.Errorf("gateway at %s is not ready: %s", base, s.NotReady)
				}
				return nil
			}
			var listErr error
			if tok != "" {
				s.Endpoints, listErr = statusEndpoints(ctx, base, tok)
			}
			if asJSON {
				if err := writeStatusJSON(cmd.OutOrStdout(), s); err != nil {
					return err
				}
			} else {
				if err := printGatewayStatus(cmd.OutOrStdout(), s, tok != "", time.Now()); err != nil {
					return err
				}
			}
			switch {
			case listErr != nil:
				return listErr
			case !s.Healthy || !s.Ready:
				return fmt.Errorf("gateway at %s is not ready: %s", base, s.NotReady)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", defaultStatusURL(os.Getenv), "the gateway (default: from UNCAGED_GATEWAY_LISTEN, else http://127.0.0.1:8080)")
	cmd.Flags().StringVar(&token, "token", "", "dashboard token (or the shared secret) to list the connectors with (default: none, health only; prefer the file or the variable)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the dashboard token; wins over --token")
	envflag.Bind(cmd.Flags(), "url", "UNCAGED_GATEWAY_URL")
	envflag.DocDefault(cmd.Flags(), "url", "from `UNCAGED_GATEWAY_LISTEN`, else `http://127.0.0.1:8080`")
	envflag.Bind(cmd.Flags(), "token", "UNCAGED_DASHBOARD_TOKEN", "WORKFLOW_DASHBOARD_SECRET")
	envflag.Bind(cmd.Flags(), "token-file", "UNCAGED_DASHBOARD_TOKEN_FILE")
	cmd.Flags().BoolVar(&health, "health", false, "only check that the gateway is ready; print nothing, exit 0 or 1")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up on a gateway that answers slower than this")
	return cmd
}

// statusGet fetches url; the body is capped, since a wrong --url may point
// at anything.
func statusGet(ctx context.Context, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, body, err
}

func statusEndpoints(ctx context.Context, base, token string) ([]statusEndpoint, error) {
	code, body, err := statusGet(ctx, base+"/api/gateway/endpoints", token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("gateway answered %d %s: %s", code, http.StatusText(code), strings.TrimSpace(string(body)))
	}
	eps := []statusEndpoint{}
	if err := json.Unmarshal(body, &eps); err != nil {
		return nil, fmt.Errorf("endpoints list: %w", err)
	}
	return eps, nil
}

func writeStatusJSON(w io.Writer, s gatewayStatus) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// printGatewayStatus is the screen for a person: the gateway's state, a
// count of connectors, and one row per connector. The error is the
// table's, written out at the end.
func printGatewayStatus(w io.Writer, s gatewayStatus, haveToken bool, now time.Time) error {
	state := "healthy, ready"
	switch {
	case !s.Healthy:
		state = "NOT healthy"
	case !s.Ready:
		state = "healthy, NOT ready: " + s.NotReady
	}
	fmt.Fprintf(w, "gateway     %s  %s\n", s.URL, state)
	if line := s.Store.line(); line != "" {
		fmt.Fprintf(w, "store       %s\n", line)
	}
	if line := s.NATS.line(); line != "" {
		fmt.Fprintf(w, "nats        %s\n", line)
	}
	if !haveToken {
		fmt.Fprintln(w, "connectors  (set UNCAGED_DASHBOARD_TOKEN to a dashboard token to list them)")
		return nil
	}
	if s.Endpoints == nil {
		return nil
	}
	online, replicas := 0, false
	for _, e := range s.Endpoints {
		if e.Status == "online" {
			online++
		}
		replicas = replicas || e.Replica != ""
	}
	fmt.Fprintf(w, "connectors  %d online, %d offline\n", online, len(s.Endpoints)-online)
	if len(s.Endpoints) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tSTATUS\tLAST HEARTBEAT\tCONNECTED\tVERSION\tADDRESS"
	if replicas {
		header += "\tREPLICA"
	}
	fmt.Fprintln(tw, header)
	for _, e := range s.Endpoints {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", e.Name, e.Status, ago(e.LastHeartbeat, now), at(e.ConnectedAt), dash(e.Version), dash(e.Address))
		if replicas {
			row += "\t" + dash(e.Replica)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func ago(ms int64, now time.Time) string {
	if ms <= 0 {
		return "-"
	}
	return now.Sub(time.UnixMilli(ms)).Round(time.Second).String() + " ago"
}

func at(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
