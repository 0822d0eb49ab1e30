package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/shared/envflag"
	"github.com/uncaged/workflow/shared/version"
)

// Environment variables of connect.
const (
	EnvToken        = "UNCAGED_WORKFLOW_TOKEN"
	EnvSharedSecret = "WORKFLOW_DASHBOARD_SECRET"
	EnvGateway      = "UNCAGED_WORKFLOW_GATEWAY"
	EnvTokenFile    = "UNCAGED_WORKFLOW_TOKEN_FILE"
)

func defaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "connector"
	}
	return strings.ToLower(strings.SplitN(h, ".", 2)[0])
}

func (a *app) connectCmd() *cobra.Command {
	var name, gateway, token, tokenFile, listen, memoryBudget string
	var takeover bool
	cmd := &cobra.Command{
		Use:   "connect [--name NAME] --gateway URL [--token-file FILE] [--listen ADDR] [--memory-budget SIZE] [--takeover]",
		Short: "Connect to workflow gateway via WebSocket",
		Long: "Serves this machine's workflows and threads to the gateway over one outgoing\n" +
			"WebSocket. The token comes from --token-file, " + EnvToken + ",\n" +
			"or the shared secret " + EnvSharedSecret + ".\n\n" +
			"A dropped connection is retried with backoff, each retry line saying why; what\n" +
			"retrying cannot fix stops connect with its own exit code (below).\n\n" +
			"Each storage root is one instance, proved with every connection by its\n" +
			"instance key (the file instance-key in the root, mode 0600, never shown; the\n" +
			"gateway shows only its fingerprint): the gateway lets this root reconnect in\n" +
			"place of its old connection, and refuses another machine or root that uses the\n" +
			"same name while this one is online. --takeover takes the name from it instead;\n" +
			"the connector that held it is told who replaced it and stops (exit " + fmt.Sprint(ExitConnectTakenOver) + ").\n" +
			"A copy of the root with its instance-key is the same instance, not another.\n\n" +
			connectExitHelp(),
		Args: exactArgs(0, 0, "", "connect takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if gateway == "" {
				return a.connectFailed(nil, name, gateway, &link.PermanentError{Kind: link.KindConfig, Message: "connect requires --gateway URL (or " + EnvGateway + ")"})
			}
			if err := link.CheckGateway(gateway); err != nil {
				return a.connectFailed(nil, name, gateway, err)
			}
			if !connectorNamePattern().MatchString(name) {
				return a.connectFailed(nil, name, gateway, &link.PermanentError{Kind: link.KindConfig,
					Message: fmt.Sprintf("invalid connector name %q: use lowercase letters, digits and hyphens (at most 63)", name)})
			}
			// --token holds the command line's value, else the first of its
			// variables (envflag); the file wins over both.
			cred, err := a.connectorToken(token, tokenFile)
			if errors.Is(err, errNoToken) {
				return a.connectFailed(nil, name, gateway, &link.PermanentError{Kind: link.KindCredential, Message: err.Error()})
			}
			if err != nil {
				return err
			}
			token = cred
			if err := setupMemory(memoryBudget, a.logger()); err != nil {
				return err
			}
			ctx, logger, handler, stop, err := a.startAPI()
			if err != nil {
				return err
			}
			defer stop()
			if listen != "" {
				stopHTTP, err := a.listen(listen, handler)
				if err != nil {
					return err
				}
				defer stopHTTP()
			}
			l, err := a.layout()
			if err != nil {
				return err
			}
			instance, err := instanceID(l)
			if err != nil {
				return err
			}
			key, err := instanceKey(l)
			if err != nil {
				return err
			}
			rec, err := recordConnect(l, name, gateway)
			if err != nil {
				return err
			}
			defer rec.close()
			err = link.Run(ctx, link.Options{Gateway: gateway, Name: name, Token: token, Handler: handler, Out: a.out(), Logger: logger,
				Version: version.Version, OnState: rec.set, Instance: instance, InstanceKey: key, Takeover: takeover})
			if err != nil {
				return a.connectFailed(rec, name, gateway, err)
			}
			fmt.Fprintln(a.out(), "disconnected: shutting down")
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", defaultName(), "the name this machine has in the gateway")
	envflag.DocDefault(cmd.Flags(), "name", "the short host name")
	cmd.Flags().StringVar(&gateway, "gateway", "", "the gateway URL")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding this connector's token; wins over --token")
	cmd.Flags().StringVar(&token, "token", "", "this connector's token, or the shared secret (prefer --token-file or the variables: arguments show in the process list)")
	envflag.Bind(cmd.Flags(), "gateway", EnvGateway)
	envflag.Bind(cmd.Flags(), "token-file", EnvTokenFile)
	envflag.Bind(cmd.Flags(), "token", EnvToken, EnvSharedSecret)
	cmd.Flags().StringVar(&listen, "listen", "", "also serve the API on this local address")
	a.addAllowOriginFlag(cmd)
	cmd.Flags().BoolVar(&takeover, "takeover", false, "take the name from another machine (instance) that holds it; that one stops")
	addMemoryBudgetFlag(cmd, &memoryBudget)
	return cmd
}

// connectorToken is the credential for the gateway — the token file's
// contents, else token — and takes the credential variables out of the
// process environment: the threads connect runs, their command
// agents and their models' shell_exec commands inherit that environment,
// and none of them is to hold (or print into a thread) a credential that
// lets its holder take this connector's place at the gateway, or with the
// shared secret use the dashboard.
func (a *app) connectorToken(token, file string) (cred string, err error) {
	defer func() {
		for _, name := range []string{EnvToken, EnvSharedSecret} {
			if uerr := os.Unsetenv(name); uerr != nil && err == nil {
				cred, err = "", fmt.Errorf("unset %s: %w", name, uerr)
			}
		}
	}()
	cred, err = envflag.ReadSecret(token, file)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	if file == "" && cred == "" {
		return "", errNoToken
	}
	return cred, nil
}

// errNoToken is connectorToken's error when there is no credential at all.
var errNoToken = errors.New("no token: pass --token-file, or set " + EnvToken + " (or the shared secret " + EnvSharedSecret + ")")

// connectFailed ends connect on a failure retrying cannot cure: the
// message on stderr, the state in connect.json, and the failure's exit
// code. Other errors pass through. rec is nil when connect fails before
// it claimed connect.json (a bad URL, no token): the failure is still
// recorded, when no other connect runs on the root, so that `status`
// says why a service keeps failing.
func (a *app) connectFailed(rec *connectRecorder, name, gateway string, err error) error {
	var perm *link.PermanentError
	if !errors.As(err, &perm) {
		return err
	}
	code := connectExitCode(perm.Kind)
	if rec == nil {
		if l, lerr := a.layout(); lerr == nil {
			if r, rerr := recordConnect(l, name, gateway); rerr == nil {
				defer r.close()
				rec = r
			}
		}
	}
	if rec != nil {
		rec.fail(perm.Message, code)
	}
	fmt.Fprintf(a.env.Stderr, "connect: %s\nconnect: stopped (exit %d): retrying cannot fix this; `uncaged-workflow connect --help` lists the exit codes\n", perm.Message, code)
	return exitError{code}
}
