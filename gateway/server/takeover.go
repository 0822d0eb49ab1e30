package server

import (
	"errors"
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
// connect, register and unregister any name except one a connector token
// has held, online or not, here or on another replica, before or after a
// restart (bindings.go): 409, until every token for the name is revoked.

// credentialOf is how p authenticated, as presence records it.
func credentialOf(p auth.Principal) string {
	if p.Shared {
		return presence.CredentialSecret
	}
	return presence.CredentialToken
}

// secretRefusal is the answer to the shared secret using name, or nil
// when it may: the one place that decides it, for connections and
// registrations alike. The name's binding in the store decides; a token
// connector online here or on another replica (presence) refuses it too,
// covering a binding whose notification is still on its way.
func (g *Gateway) secretRefusal(name string) error {
	bound, known := g.bindings.state(name)
	switch {
	case bound || g.presence.HeldByToken(name):
		return echo.NewHTTPError(http.StatusConflict, heldMessage(name))
	case g.opts.Cluster != nil:
		for _, e := range g.opts.Cluster.Endpoints(nil) {
			if e.Name == name && e.Status == presence.Online && e.Credential == presence.CredentialToken {
				return echo.NewHTTPError(http.StatusConflict, heldMessage(name))
			}
		}
	}
	if !known {
		return errBindingsUnknown
	}
	return nil
}

// heldMessage is the 409 refusing the shared secret a token-bound name.
func heldMessage(name string) string {
	return fmt.Sprintf("connector name %q is held by a token-bound connector: the shared secret cannot take it over (connect with a connector token for %q; `uncaged-gateway token revoke --connector %s` releases it)", name, name, name)
}

// One name, one instance. A connector proves its instance (one per
// storage root) with its instance key (tunnel.InstanceKeyHeader); the
// gateway knows it by its fingerprint only (presence.InstanceOf) and
// shows nothing else: not in the 409, the endpoints list, the cluster's
// messages, the logs nor the audit log. A reconnection from the instance
// holding the name replaces its old connection quietly (a network blip);
// another instance is refused with 409 while the holder is online, here
// or on another replica, unless it asks to take over
// (tunnel.TakeoverHeader), and then the holder is closed with a reason
// naming its successor (presence.TakeoverReason), on which it stops
// reconnecting. presence.Differs says who is the same instance, for
// older connectors (an instance id and no key) and original clients (no
// instance) too. In cluster mode a takeover of a name held on another
// replica closes the holder through the cluster's newer-connection rule,
// whose reason does not carry the takeover mark: the old holder
// reconnects, meets the 409, and stops then.

// instanceOf reads the newcomer's instance (as a fingerprint) and takeover
// request; a malformed id or key is a 400, not an anonymous connection.
func instanceOf(r *http.Request) (instance string, takeover bool, err error) {
	instance, err = presence.InstanceOf(r.Header.Get(tunnel.InstanceHeader), r.Header.Get(tunnel.InstanceKeyHeader))
	switch {
	case errors.Is(err, presence.ErrBadInstanceKey):
		return "", false, echo.NewHTTPError(http.StatusBadRequest, "invalid "+tunnel.InstanceKeyHeader+": 32 to 128 letters, digits, '-' and '_'")
	case err != nil:
		return "", false, echo.NewHTTPError(http.StatusBadRequest, "invalid "+tunnel.InstanceHeader+": 1 to 64 letters, digits, '-' and '_'")
	}
	return instance, r.Header.Get(tunnel.TakeoverHeader) == "1", nil
}

// remoteHolder is the connection holding name online on another replica
// (cluster mode), and since when; nil when there is none.
func (g *Gateway) remoteHolder(name string) (*presence.Info, time.Time) {
	if g.opts.Cluster == nil {
		return nil, time.Time{}
	}
	for _, e := range g.opts.Cluster.Endpoints(nil) {
		if e.Name == name && e.Status == presence.Online {
			return &presence.Info{Instance: e.Instance, Address: e.Address, Credential: e.Credential, Protocol: e.Protocol}, time.UnixMilli(e.ConnectedAt)
		}
	}
	return nil, time.Time{}
}

// instanceConflict is the refusal a connection described by info meets
// for name before its upgrade: another instance holds the name online
// here or, in cluster mode, on another replica. nil lets it on.
func (g *Gateway) instanceConflict(name string, info presence.Info) *presence.ConflictError {
	if c := g.presence.Conflict(name, info); c != nil {
		return c
	}
	if info.Takeover {
		return nil
	}
	if held, since := g.remoteHolder(name); held != nil && presence.Differs(held.Instance, info.Instance) {
		return &presence.ConflictError{Name: name, Holder: *held, Since: since}
	}
	return nil
}

// admit decides, before the upgrade, whether the connection p made for
// name (described by info) may have it, records the name's binding to a
// token, and audits a refusal: an error to answer, or an answer written
// (a 409 with its holder). remote is the holder online on another replica
// that the connection will replace, if any.
func (g *Gateway) admit(c echo.Context, name string, p auth.Principal, info presence.Info) (remote *presence.Info, err error) {
	if p.Shared {
		if err := g.secretRefusal(name); err != nil {
			reason := presence.ErrTokenBound.Error()
			if errorStatus(err) != http.StatusConflict {
				reason = "name bindings not loaded yet"
			}
			g.opts.Logger.Warn("connector refused", "connector", name, "reason", reason, "address", c.RealIP(), "shared_secret", true)
			g.auditConnection(c, time.Now(), ActionConnectRefused, name, p, info, errorStatus(err), "refused: "+reason)
			return nil, err
		}
	}
	if conflict := g.instanceConflict(name, info); conflict != nil {
		return nil, g.refuseConflict(c, conflict, info, p)
	}
	if err := g.bindName(c.Request().Context(), name, p); err != nil {
		g.auditConnection(c, time.Now(), ActionConnectRefused, name, p, info, errorStatus(err), "refused: the name's binding was not saved")
		return nil, err
	}
	remote, _ = g.remoteHolder(name)
	return remote, nil
}

// connected logs and audits a connection that has the name now: a new
// holder, a replacement of the same instance, or a takeover. replaced is
// the connection it closed here or, failing that, on another replica. at
// is a moment before the connection was let on: a request it carries is
// audited later, and the audit log lists the connection before it.
func (g *Gateway) connected(c echo.Context, at time.Time, name string, p auth.Principal, info presence.Info, replaced, remote *presence.Info) {
	if replaced == nil {
		replaced = remote
	}
	what := fmt.Sprintf("%s, instance %s", info.Protocol, instanceLabel(info.Instance))
	if replaced == nil {
		g.auditConnection(c, at, ActionConnect, name, p, info, http.StatusSwitchingProtocols, what)
		return
	}
	g.logReplacement(name, info, replaced)
	action, how := ActionReplace, "replaced the same instance"
	if presence.Differs(replaced.Instance, info.Instance) {
		action, how = ActionTakeover, "took the name from instance "+instanceLabel(replaced.Instance)
	}
	g.auditConnection(c, at, action, name, p, info, http.StatusSwitchingProtocols,
		fmt.Sprintf("%s %s (%s) at %s", what, how, replaced.Credential, replaced.Address))
}

// refusedLate logs and audits a connection Attach refused after its
// upgrade (another connection took the name since admit), and returns
// the reason to close it with.
func (g *Gateway) refusedLate(c echo.Context, name string, p auth.Principal, info presence.Info, err error) string {
	if conflict, ok := errors.AsType[*presence.ConflictError](err); ok {
		g.logConflict(conflict, info)
		g.auditConnection(c, time.Now(), ActionConnectRefused, name, p, info, http.StatusConflict, conflictTarget(conflict, info))
		return conflict.Error()
	}
	g.opts.Logger.Warn("connector refused", "connector", name, "reason", err.Error(), "address", c.RealIP(), "shared_secret", true)
	g.auditConnection(c, time.Now(), ActionConnectRefused, name, p, info, http.StatusConflict, "refused: "+presence.ErrTokenBound.Error())
	return "name " + presence.ErrTokenBound.Error()
}

// instanceLabel is a fingerprint as entries show it.
func instanceLabel(fingerprint string) string {
	if fingerprint == "" {
		return "(none)"
	}
	return fingerprint
}

// conflictTarget is an audit entry's account of a conflict.
func conflictTarget(conflict *presence.ConflictError, info presence.Info) string {
	return fmt.Sprintf("refused: instance %s; the name is held by instance %s from %s", instanceLabel(info.Instance),
		instanceLabel(conflict.Holder.Instance), conflict.Holder.Address)
}

// auditConnection records a connection event for name, which happened
// at at; a storm of them (two roots sharing one key replace each other at
// every reconnection) is coalesced per name and action.
func (g *Gateway) auditConnection(c echo.Context, at time.Time, action, name string, p auth.Principal, info presence.Info, status int, target string) {
	tokenID, actor := principalActor(p)
	markAudited(c)
	e := auditEntry(tokenID, actor, info.Address, action, name, target, status)
	e.Time = at
	g.audit.addCoalesced(action+"|"+name, e)
}

// conflictHolder is the holder part of a 409's body, for programs.
type conflictHolder struct {
	// Instance is the holder's fingerprint.
	Instance string `json:"instance"`
	Address  string `json:"address"`
	// Since is when the holder connected (ms since the epoch).
	Since int64 `json:"since"`
}

// refuseConflict logs and audits the refusal of another instance and
// answers it 409 {"error": why, "reason": "instance-conflict", "holder":
// {...}}.
func (g *Gateway) refuseConflict(c echo.Context, conflict *presence.ConflictError, info presence.Info, p auth.Principal) error {
	g.logConflict(conflict, info)
	g.auditConnection(c, time.Now(), ActionConnectRefused, conflict.Name, p, info, http.StatusConflict, conflictTarget(conflict, info))
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
	if presence.Differs(replaced.Instance, info.Instance) {
		g.opts.Logger.Warn("connector taken over", args...)
		return
	}
	g.opts.Logger.Info("connector replaced", args...)
}
