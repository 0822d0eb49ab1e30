package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/uncaged/workflow/connector/link"
)

// Exit codes of `connect` for failures that retrying cannot cure. connect
// retries everything else forever (the gateway down, a proxy's 502), so
// one of these means a person must change something; `service install`'s
// unit lists them in RestartPreventExitStatus so systemd does not restart
// into the same failure either. `status` shows the reason afterwards.
const (
	// ExitConnectConfig: the gateway URL or the name cannot work — no
	// scheme, an unsupported scheme, no host, plain http:// to an HTTPS
	// port, a name the gateway would refuse, or a request the gateway
	// calls malformed (400).
	ExitConnectConfig = 10
	// ExitConnectCredential: the gateway refused the token (401, 403:
	// expired, revoked, a dashboard token, another connector's), or there
	// is none (no token, or a --token-file that cannot be read or is
	// empty).
	ExitConnectCredential = 11
	// ExitConnectTLS: the gateway's certificate did not verify.
	ExitConnectTLS = 12
	// ExitConnectNotTunnel: the URL answers, but not with the gateway's
	// tunnel: a web page, a 404 (a wrong path), or a proxy that drops the
	// WebSocket upgrade (426).
	ExitConnectNotTunnel = 13
	// ExitConnectNameTaken: another machine or storage root holds the name
	// (409), or the name is bound to a token and this is the shared secret.
	ExitConnectNameTaken = 14
	// ExitConnectTakenOver: another instance took the name with
	// --takeover while this one was connected.
	ExitConnectTakenOver = 15
	// ExitConnectRootInUse: another connect already serves this storage
	// root; only one may (found before anything is dialed).
	ExitConnectRootInUse = 16
)

// connectExitCodes are the codes above, in order, with what each means,
// for the help text and the systemd unit.
var connectExitCodes = []struct {
	code int
	kind link.Kind
	what string
}{
	{ExitConnectConfig, link.KindConfig, "the gateway URL or name cannot work (no or unsupported scheme, http:// to an HTTPS port, an invalid name, 400)"},
	{ExitConnectCredential, link.KindCredential, "the gateway refused the token (401/403: expired, revoked, wrong kind, another connector's), or there is none (no token; --token-file missing, unreadable or empty)"},
	{ExitConnectTLS, link.KindTLS, "the gateway's TLS certificate did not verify"},
	{ExitConnectNotTunnel, link.KindNotTunnel, "the URL answers with a web page, a 404 or without the WebSocket upgrade: not the gateway's tunnel"},
	{ExitConnectNameTaken, link.KindNameTaken, "another machine (instance) holds the name, or a token-bound connector and this is the shared secret (409); --takeover takes it from another instance"},
	{ExitConnectTakenOver, link.KindTakenOver, "another instance took the name with --takeover"},
	{ExitConnectRootInUse, link.KindRootInUse, "another connect already serves this storage root (one per root: a second would keep replacing it at the gateway); the message names its pid"},
}

// connectExitCode is the exit code of a link's permanent failure.
func connectExitCode(k link.Kind) int {
	for _, c := range connectExitCodes {
		if c.kind == k {
			return c.code
		}
	}
	return 1
}

// connectExitHelp is the exit code table of connect's long help.
func connectExitHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes: 0 stopped by a signal; 1 any other error at start; and when retrying\n" +
		"cannot help (the process stops instead of looping; `status` shows why):\n")
	for _, c := range connectExitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", c.code, c.what)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// restartPreventExitStatus is the unit's list of connect's permanent
// failures: systemd restarts connect on anything else.
func restartPreventExitStatus() string {
	codes := make([]string, len(connectExitCodes))
	for i, c := range connectExitCodes {
		codes[i] = strconv.Itoa(c.code)
	}
	return strings.Join(codes, " ")
}
