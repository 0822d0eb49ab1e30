package server

import (
	"fmt"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
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
