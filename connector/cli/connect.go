package cli

import (
	"errors"
	"fmt"
	"io/fs"
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
			"A copy of the root with its instance-key is the same instance, not another.\n" +
			"Only one connect may serve a storage root: a second one stops at once (exit " + fmt.Sprint(ExitConnectRootInUse) + ")\n" +
			"and names the first one's pid.\n\n" +
			"Threads run in the root's engine host, started in the background when one is\n" +
			"needed, as `run` starts it: stopping connect leaves them running, and says how\n" +
			"many (`uncaged-workflow engine stop` stops the host). The host logs to\n" +
			"logs/engine.log in the root.\n\n" +
			"Output is text (state lines on stdout; refusals and the log on stderr) unless\n" +
			"--log-format json, which makes every line a JSON record on stderr.\n\n" +
			connectExitHelp(),
		Args: exactArgs(0, 0, "", "connect takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := a.apiOutput()
			refuse := func(err error) error {
				var perm *link.PermanentError
				if errors.As(err, &perm) {
					a.recordRefusal(name, gateway, perm)
				}
				return out.stopped("connect", err)
			}
			if gateway == "" {
				return refuse(&link.PermanentError{Kind: link.KindConfig, Message: "connect requires --gateway URL (or " + EnvGateway + ")"})
			}
			if err := link.CheckGateway(gateway); err != nil {
				return refuse(err)
			}
			if !connectorNamePattern().MatchString(name) {
				return refuse(&link.PermanentError{Kind: link.KindConfig,
					Message: fmt.Sprintf("invalid connector name %q: use lowercase letters, digits and hyphens (at most 63)", name)})
			}
			// --token holds the command line's value, else the first of its
			// variables (envflag); the file wins over both.
			cred, err := a.connectorToken(name, token, tokenFile)
			if err != nil {
				return refuse(err)
			}
			token = cred
			hostArgs, err := a.hostFlags(memoryBudget)
			if err != nil {
				return out.stopped("connect", err)
			}
			// One connect per root, found before anything is served or
			// dialed.
			l, err := a.layout()
			if err != nil {
				return out.stopped("connect", err)
			}
			rec, err := recordConnect(l, name, gateway)
			if err != nil {
				return out.stopped("connect", err)
			}
			defer rec.close()
			ctx, _, handler, stop, err := a.startAPI(out, hostArgs)
			if err != nil {
				return out.stopped("connect", err)
			}
			defer stop()
			if listen != "" {
				stopHTTP, err := a.listen(out, listen, handler)
				if err != nil {
					return out.stopped("connect", err)
				}
				defer stopHTTP()
			}
			instance, err := instanceID(l)
			if err != nil {
				return out.stopped("connect", err)
			}
			key, err := instanceKey(l)
			if err != nil {
				return out.stopped("connect", err)
			}
			err = link.Run(ctx, link.Options{Gateway: gateway, Name: name, Token: token, Handler: handler, Out: out.stdout, Logger: out.logger,
				Version: version.Version, OnState: rec.set, Instance: instance, InstanceKey: key, Takeover: takeover})
			var perm *link.PermanentError
			if errors.As(err, &perm) {
				rec.fail(perm.Message, connectExitCode(perm.Kind))
			}
			if err != nil {
				return out.stopped("connect", err)
			}
			out.say("disconnected; " + threadsLeft(l))
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
	addHostMemoryBudgetFlag(cmd, &memoryBudget)
	return cmd
}

// connectorToken is the credential for the gateway — the token file's
// contents, else token — and takes the credential variables out of the
// process environment: the threads connect runs, their command
// agents and their models' shell_exec commands inherit that environment,
// and none of them is to hold (or print into a thread) a credential that
// lets its holder take this connector's place at the gateway, or with the
// shared secret use the dashboard. No credential — none given, or a
// token file that cannot be read or is empty — is a credential failure
// (*link.PermanentError of KindCredential).
func (a *app) connectorToken(name, token, file string) (cred string, err error) {
	defer func() {
		for _, name := range []string{EnvToken, EnvSharedSecret} {
			if uerr := os.Unsetenv(name); uerr != nil && err == nil {
				cred, err = "", fmt.Errorf("unset %s: %w", name, uerr)
			}
		}
	}()
	noToken := func(msg string) error { return &link.PermanentError{Kind: link.KindCredential, Message: msg} }
	cred, err = envflag.ReadSecret(token, file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", noToken(fmt.Sprintf("--token-file %s: no such file; write this connector's token there (`uncaged-gateway token create --connector %s > %s`), or pass the file that holds it", file, name, file))
	case err != nil:
		return "", noToken(fmt.Sprintf("--token-file: %v", err))
	case file != "" && cred == "":
		return "", noToken(fmt.Sprintf("--token-file %s is empty: it should hold this connector's token (`uncaged-gateway token create --connector %s > %s`)", file, name, file))
	case cred == "":
		return "", noToken("no token: pass --token-file, or set " + EnvToken + " (or the shared secret " + EnvSharedSecret + ")")
	}
	return cred, nil
}

// recordRefusal records, for `status`, why connect stopped before it
// claimed the root (a bad URL, no token), when no other connect runs on
// the root: a service that keeps failing says why.
func (a *app) recordRefusal(name, gateway string, perm *link.PermanentError) {
	l, err := a.layout()
	if err != nil {
		return
	}
	if r, err := recordConnect(l, name, gateway); err == nil {
		r.fail(perm.Message, connectExitCode(perm.Kind))
		r.close()
	}
}
