package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/envflag"
)

// ServiceUnitName is the systemd user unit `service install` writes.
const ServiceUnitName = "uncaged-workflow-connect.service"

// connectorNamePattern is the gateway's rule for connector names; checking
// it here turns a unit that would be refused at every restart into an
// error at install time.
var connectorNamePattern = lazyRegexp(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// serviceUnit is what the unit runs.
type serviceUnit struct {
	Binary    string // absolute path of uncaged-workflow
	Name      string
	Gateway   string
	TokenFile string // absolute
	// StorageRoot is baked in only when the installing shell chose one by
	// environment: a user service does not see that shell's variables.
	StorageRoot string
}

// render writes the unit file. The token is passed as a --token-file path
// rather than through LoadCredential=, which user managers before systemd
// 252 or so do not support; a user unit gains nothing from it anyway, since
// the file is the user's own.
func (u serviceUnit) render() (string, error) {
	args := []string{u.Binary, "connect", "--name", u.Name, "--gateway", u.Gateway, "--token-file", u.TokenFile}
	quoted := make([]string, len(args))
	for i, a := range args {
		q, err := systemdQuote(a)
		if err != nil {
			return "", err
		}
		quoted[i] = q
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# uncaged-workflow connect as a systemd user service. Written by\n")
	fmt.Fprintf(&b, "# `uncaged-workflow service install`; run it again with --force to change it.\n")
	fmt.Fprintf(&b, "[Unit]\n")
	fmt.Fprintf(&b, "Description=uncaged-workflow connect %s to %s\n", specifierEscape(u.Name), specifierEscape(u.Gateway))
	fmt.Fprintf(&b, "Documentation=https://github.com/uncaged/workflow#deploy\n")
	// connect retries what can get better by itself, and exits with a code
	// of its own on what cannot (RestartPreventExitStatus below); on any
	// other exit (a full disk) systemd must not give up on it either.
	fmt.Fprintf(&b, "StartLimitIntervalSec=0\n\n")
	fmt.Fprintf(&b, "[Service]\n")
	fmt.Fprintf(&b, "Type=simple\n")
	fmt.Fprintf(&b, "ExecStart=%s\n", strings.Join(quoted, " "))
	if u.StorageRoot != "" {
		env, err := environmentQuote(storage.EnvRoot + "=" + u.StorageRoot)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "Environment=%s\n", env)
	}
	fmt.Fprintf(&b, "Restart=always\n")
	// connect's exit codes for what retrying cannot fix (a refused or
	// revoked token, a wrong URL, the name taken over): restarting would
	// only repeat it; `uncaged-workflow status` says why it stopped.
	fmt.Fprintf(&b, "RestartPreventExitStatus=%s\n", restartPreventExitStatus())
	fmt.Fprintf(&b, "RestartSec=5s\n")
	// SIGTERM to connect alone, and nothing else: the engine host it
	// started (in this unit's cgroup) runs on with its threads, so that
	// stopping or restarting the service never stops a thread
	// (`uncaged-workflow engine stop` stops the host).
	fmt.Fprintf(&b, "KillMode=process\n")
	fmt.Fprintf(&b, "TimeoutStopSec=30s\n\n")
	fmt.Fprintf(&b, "[Install]\n")
	fmt.Fprintf(&b, "WantedBy=default.target\n")
	return b.String(), nil
}

// systemdQuote makes one ExecStart word: specifiers (%) and variable
// references ($) are escaped so the value arrives verbatim, and words with
// spaces or quotes are double-quoted. Control characters cannot be written
// into a unit line at all.
func systemdQuote(s string) (string, error) { return unitWord(s, "$$") }

// environmentQuote makes an Environment= assignment: as systemdQuote, but
// "$" stays single, since systemd expands no variables there and "$$"
// would reach the service as two dollars.
func environmentQuote(s string) (string, error) { return unitWord(s, "$") }

// unitWord quotes s for a unit line, writing each "$" as dollar.
func unitWord(s, dollar string) (string, error) {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%q cannot go into a systemd unit (control character)", s)
		}
	}
	s = strings.ReplaceAll(specifierEscape(s), "$", dollar)
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s, nil
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`, nil
}

func specifierEscape(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// userUnitDir is where systemd looks for the user's own units.
func userUnitDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "systemd", "user"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find the systemd user directory: HOME is not set")
	}
	return filepath.Join(home, ".config", "systemd", "user"), nil
}

func (a *app) serviceCmd() *cobra.Command {
	var name, gateway, tokenFile, binary string
	var dryRun, force bool
	install := &cobra.Command{
		Use:   "install --gateway URL --token-file FILE [--name NAME]",
		Short: "Write a systemd user unit that keeps connect running",
		Long: "Writes ~/.config/systemd/user/" + ServiceUnitName + " ($XDG_CONFIG_HOME is honoured):\n" +
			"`uncaged-workflow connect` restarted whenever it stops, its token read from --token-file.\n" +
			"It does not run systemctl; it prints the commands that enable the service.",
		Args: exactArgs(0, 0, "", "service install takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := a.serviceUnit(name, gateway, tokenFile, binary)
			if err != nil {
				return err
			}
			unit, err := u.render()
			if err != nil {
				return err
			}
			if dryRun {
				fmt.Fprint(a.out(), unit)
				return nil
			}
			dir, err := userUnitDir(a.env.Getenv)
			if err != nil {
				return err
			}
			path := filepath.Join(dir, ServiceUnitName)
			old, err := os.ReadFile(path)
			switch {
			case err == nil && bytes.Equal(old, []byte(unit)):
				fmt.Fprintf(a.out(), "%s is up to date\n", path)
			case err == nil && !force:
				return fmt.Errorf("%s exists with other contents; pass --force to replace it (--dry-run shows the new one)", path)
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				return err
			default:
				if err := atomicfile.Write(path, []byte(unit), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(a.out(), "wrote %s\n", path)
			}
			unitName := strings.TrimSuffix(ServiceUnitName, ".service")
			fmt.Fprintf(a.out(), "next:\n")
			fmt.Fprintf(a.out(), "  systemctl --user daemon-reload && systemctl --user enable --now %s\n", unitName)
			fmt.Fprintf(a.out(), "then:\n")
			fmt.Fprintf(a.out(), "  uncaged-workflow status                 # the link's state\n")
			fmt.Fprintf(a.out(), "  journalctl --user -u %s -f\n", unitName)
			fmt.Fprintf(a.out(), "  loginctl enable-linger \"$USER\"         # keep it running while you are logged out\n")
			return nil
		},
	}
	install.Flags().StringVar(&name, "name", defaultName(), "the name this machine has in the gateway")
	envflag.DocDefault(install.Flags(), "name", "the short host name")
	install.Flags().StringVar(&gateway, "gateway", "", "the gateway URL")
	envflag.Bind(install.Flags(), "gateway", EnvGateway)
	install.Flags().StringVar(&tokenFile, "token-file", "", "file holding this connector's token (required; keep it mode 600)")
	install.Flags().StringVar(&binary, "binary", "", "the uncaged-workflow the unit runs (default: this one)")
	install.Flags().BoolVar(&dryRun, "dry-run", false, "print the unit instead of writing it")
	install.Flags().BoolVar(&force, "force", false, "replace an existing unit with other contents")
	cmd := group("service", "Gateway:", "Run connect as a systemd user service", install)
	return cmd
}

// serviceUnit checks the flags and resolves every path the unit needs to
// absolute form (a unit has no working directory of the caller's).
func (a *app) serviceUnit(name, gateway, tokenFile, binary string) (serviceUnit, error) {
	if gateway == "" {
		return serviceUnit{}, errors.New("service install requires --gateway URL (or " + EnvGateway + ")")
	}
	if err := link.CheckGateway(gateway); err != nil {
		return serviceUnit{}, err
	}
	if !connectorNamePattern().MatchString(name) {
		return serviceUnit{}, fmt.Errorf("invalid connector name %q: use lowercase letters, digits and hyphens (at most 63)", name)
	}
	if tokenFile == "" {
		return serviceUnit{}, errors.New("service install requires --token-file FILE (mint one with `uncaged-gateway token create --connector " + name + "`)")
	}
	tokenPath, err := filepath.Abs(tokenFile)
	if err != nil {
		return serviceUnit{}, err
	}
	st, err := os.Stat(tokenPath)
	if err != nil {
		return serviceUnit{}, fmt.Errorf("token file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return serviceUnit{}, fmt.Errorf("token file %s is not a regular file", tokenPath)
	}
	tok, err := os.ReadFile(tokenPath)
	if err != nil {
		return serviceUnit{}, fmt.Errorf("token file: %w", err)
	}
	if strings.TrimSpace(string(tok)) == "" {
		return serviceUnit{}, fmt.Errorf("token file %s is empty", tokenPath)
	}
	if st.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(a.env.Stderr, "warning: %s is readable by other users; chmod 600 it\n", tokenPath)
	}
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return serviceUnit{}, fmt.Errorf("find this binary (pass --binary): %w", err)
		}
	}
	if binary, err = filepath.Abs(binary); err != nil {
		return serviceUnit{}, err
	}
	if st, err := os.Stat(binary); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return serviceUnit{}, fmt.Errorf("%s is not an executable file (pass --binary)", binary)
	}
	if strings.HasPrefix(binary, filepath.Clean(os.TempDir())+string(filepath.Separator)) {
		// `go run` builds into the temp directory, which does not last.
		fmt.Fprintf(a.env.Stderr, "warning: %s is a temporary build; install the binary and pass --binary\n", binary)
	}
	u := serviceUnit{Binary: binary, Name: name, Gateway: gateway, TokenFile: tokenPath}
	if a.storageRoot != "" { // chosen by --storage-root or its variables
		l, err := a.layout()
		if err != nil {
			return serviceUnit{}, err
		}
		if u.StorageRoot, err = filepath.Abs(l.Root); err != nil {
			return serviceUnit{}, err
		}
	}
	return u, nil
}
