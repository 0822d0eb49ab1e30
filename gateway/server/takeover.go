package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/tunnel"
)

// Who may take a connector's name. A connector token is valid for its own
// name only (auth refuses another name's token with 403), and a newer
// connection with a token for the name replaces the older one, which may
// have come with a token or with the shared secret. The shared secret may
// connect any name except one a token-bound connector holds — online, or
// offline while the endpoints list still shows it (409): the secret would
// otherwise take the machine's requests whenever it reconnects.

// credentialOf is how p authenticated, as presence records it.
func credentialOf(p auth.Principal) string {
	if p.Shared {
		return presence.CredentialSecret
	}
	return presence.CredentialToken
}

// heldByToken says whether name belongs to a token-bound connector here
// or, in cluster mode, on the replica the endpoints list shows it on.
func (g *Gateway) heldByToken(name string) bool {
	if g.presence.HeldByToken(name) {
		return true
	}
	if cl := g.opts.Cluster; cl != nil {
		for _, e := range cl.Endpoints(nil) {
			if e.Name == name {
				return e.Credential == presence.CredentialToken
			}
		}
	}
	return false
}

// heldMessage is the 409 refusing the shared secret a token-bound name.
func heldMessage(name string) string {
	return fmt.Sprintf("connector name %q is held by a token-bound connector: the shared secret cannot take it over (connect with a connector token for %q)", name, name)
}

// One name, one instance. A connector sends its instance id
// (tunnel.InstanceHeader, one per storage root). A reconnection from the
// instance holding the name replaces its old connection quietly (a
// network blip); another instance is refused with 409 while the holder is
// online, here or on another replica, unless it asks to take over
// (tunnel.TakeoverHeader), and then the holder is closed with a reason
// naming its successor (presence.TakeoverReason), on which it stops
// reconnecting. Connections without an instance id (original clients,
// older connectors) replace and are replaced as before. In cluster mode a
// takeover of a name held on another replica closes the holder through
// the cluster's newer-connection rule, whose reason does not carry the
// takeover mark: the old holder reconnects, meets the 409, and stops then.

// instanceOf reads the newcomer's instance id and takeover request; a
// malformed id is a 400, not an anonymous connection.
func instanceOf(r *http.Request) (instance string, takeover bool, err error) {
	instance = r.Header.Get(tunnel.InstanceHeader)
	if instance != "" && !presence.ValidInstance(instance) {
		return "", false, echo.NewHTTPError(http.StatusBadRequest, "invalid "+tunnel.InstanceHeader+": 1 to 64 letters, digits, '-' and '_'")
	}
	return instance, r.Header.Get(tunnel.TakeoverHeader) == "1", nil
}

// instanceConflict is the refusal a connection described by info meets
// for name before its upgrade: another instance holds the name online
// here or, in cluster mode, on another replica. nil lets it on.
func (g *Gateway) instanceConflict(name string, info presence.Info) *presence.ConflictError {
	if c := g.presence.Conflict(name, info); c != nil {
		return c
	}
	if info.Instance == "" || info.Takeover || g.opts.Cluster == nil {
		return nil
	}
	for _, e := range g.opts.Cluster.Endpoints(nil) {
		if e.Name == name && e.Status == presence.Online && e.Instance != "" && e.Instance != info.Instance {
			return &presence.ConflictError{Name: name, Holder: presence.Info{Instance: e.Instance, Address: e.Address}, Since: time.UnixMilli(e.ConnectedAt)}
		}
	}
	return nil
}

// conflictHolder is the holder part of a 409's body, for programs.
type conflictHolder struct {
	Instance string `json:"instance"`
	Address  string `json:"address"`
	// Since is when the holder connected (ms since the epoch).
	Since int64 `json:"since"`
}

// refuseConflict logs the refusal of another instance and answers it 409
// {"error": why, "reason": "instance-conflict", "holder": {...}}.
func (g *Gateway) refuseConflict(c echo.Context, conflict *presence.ConflictError, info presence.Info) error {
	g.logConflict(conflict, info)
	return c.JSON(http.StatusConflict, struct {
		Error  string         `json:"error"`
		Reason string         `json:"reason"`
		Holder conflictHolder `json:"holder"`
	}{conflict.Error(), ReasonInstanceConflict, conflictHolder{conflict.Holder.Instance, conflict.Holder.Address, conflict.Since.UnixMilli()}})
}

// ReasonInstanceConflict is the "reason" of a 409 refusing a connector
// because another instance holds its name.
const ReasonInstanceConflict = "instance-conflict"

func (g *Gateway) logConflict(conflict *presence.ConflictError, info presence.Info) {
	g.opts.Logger.Warn("connector refused", "connector", conflict.Name, "reason", "held by another instance",
		"instance", info.Instance, "address", info.Address,
		"holder_instance", conflict.Holder.Instance, "holder_address", conflict.Holder.Address,
		"holder_since", conflict.Since.UTC().Format(time.RFC3339))
}

// logReplacement logs a connection taking a name from another: quietly
// (info) for a reconnection, as a warning for a takeover.
func (g *Gateway) logReplacement(name string, info presence.Info, replaced *presence.Info) {
	args := []any{"connector", name, "address", info.Address, "credential", info.Credential,
		"replaced_address", replaced.Address, "replaced_credential", replaced.Credential}
	if info.Instance != "" || replaced.Instance != "" {
		args = append(args, "instance", info.Instance, "replaced_instance", replaced.Instance)
	}
	if info.Instance != "" && replaced.Instance != "" && info.Instance != replaced.Instance {
		g.opts.Logger.Warn("connector taken over", args...)
		return
	}
	g.opts.Logger.Info("connector replaced", args...)
}
