package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/shared/envflag"
)

// notifyFlags are serve's webhook flags (gateway/notify).
type notifyFlags struct {
	urls, on                      []string
	secretFile, format, publicURL string
}

func (n *notifyFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&n.urls, "notify-url", nil, "URL the gateway POSTs a webhook to when a thread on any machine starts waiting, fails or completes; repeatable (the variable: comma-separated; default: none). Only its scheme and host are ever logged")
	f.StringArrayVar(&n.on, "notify-on", nil, "statuses to notify of: waiting, failed, completed, comma-separated or repeated (default: all three)")
	f.StringVar(&n.secretFile, "notify-secret-file", "", "file holding the secret each webhook body is signed with (HMAC-SHA256 in X-Uncaged-Signature: sha256=...); required with --notify-format json")
	f.StringVar(&n.format, "notify-format", string(notify.FormatJSON), "webhook body: json (the gateway's own, signed) or slack ({\"text\": ...}, for incoming-webhook URLs)")
	f.StringVar(&n.publicURL, "public-url", "", "https://host[/path] where users reach this gateway, for the dashboard links in notifications and the URLs of webhook triggers (default: none: notifications carry no link, and a trigger's URL names the address a request came to)")
	for _, name := range []string{"notify-url", "notify-on", "notify-secret-file", "notify-format", "public-url"} {
		envflag.Bind(f, name, envName(name))
	}
}

// config checks the flags and reads the secret: nil when no receiver is
// given. Every error names its flag and never quotes a URL, which may be
// a secret.
func (n *notifyFlags) config() (*notify.Config, error) {
	publicURL, err := notify.ParsePublicURL(n.publicURL)
	if err != nil {
		return nil, fmt.Errorf("--public-url: %w", err)
	}
	format, err := notify.ParseFormat(n.format)
	if err != nil {
		return nil, fmt.Errorf("--notify-format: %w", err)
	}
	on, err := notify.ParseOn(n.on)
	if err != nil {
		return nil, fmt.Errorf("--notify-on: %w", err)
	}
	targets, err := notify.ParseTargets(n.urls)
	if err != nil {
		return nil, fmt.Errorf("--notify-url: %w", err)
	}
	if len(targets) == 0 {
		if len(n.on) > 0 || n.secretFile != "" {
			return nil, fmt.Errorf("--notify-on and --notify-secret-file need --notify-url: no webhook is configured")
		}
		return nil, nil
	}
	cfg := &notify.Config{Targets: targets, On: on, Format: format, PublicURL: publicURL}
	switch {
	case n.secretFile != "":
		if cfg.Secret, err = notify.ReadSecret(n.secretFile); err != nil {
			return nil, fmt.Errorf("--notify-secret-file: %w", err)
		}
	case format == notify.FormatJSON:
		return nil, fmt.Errorf("--notify-url needs --notify-secret-file with --notify-format json: receivers verify the signature")
	}
	return cfg, nil
}
