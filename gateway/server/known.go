package server

import (
	"context"
	"sort"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
)

// One story about a connector that is known but not connected. The
// endpoints list used to hold only the connections this process had seen,
// so after a restart it was empty while GET /api/gateway/machines, read
// from the store, still listed every machine, and nothing said which
// names were a token's. Now both lists hold the same names: those
// connected (to any replica), those the fleet remembers, and those bound
// to a connector token; a name nobody holds is offline in both, with its
// last-seen time, and "credential": "token" in both when it is bound.

// withRemembered adds to an endpoints list (of E, this process's or the
// cluster's) the names known but missing from it, offline, and returns it
// sorted by name. wrap makes an E of a presence.Endpoint.
func withRemembered[E any](ctx context.Context, g *Gateway, eps []E, nameOf func(E) string, wrap func(presence.Endpoint) E) []E {
	listed := make(map[string]bool, len(eps))
	for _, e := range eps {
		listed[nameOf(e)] = true
	}
	added := false
	for name, seen := range g.knownNames(ctx) {
		if listed[name] || g.registrations.Removed(name) {
			continue
		}
		e := presence.Endpoint{Name: name, URL: "tunnel://" + name, Status: presence.Offline, LastHeartbeat: seen.UnixMilli()}
		if bound, _ := g.bindings.state(name); bound {
			e.Credential = presence.CredentialToken
		}
		eps = append(eps, wrap(e))
		added = true
	}
	if added {
		sort.Slice(eps, func(i, j int) bool { return nameOf(eps[i]) < nameOf(eps[j]) })
	}
	return eps
}

// knownNames are the names the store knows, with when each was last seen:
// the fleet's machines (their last sighting) and the bound names (their
// binding, when the fleet does not remember them). A store that does not
// answer leaves the fleet's out: the list is still what this process
// knows.
func (g *Gateway) knownNames(ctx context.Context) map[string]time.Time {
	out := map[string]time.Time{}
	for _, b := range g.bindings.list() {
		out[b.Name] = b.BoundAt
	}
	if g.fleet == nil {
		return out
	}
	machines, err := g.fleet.cachedLastSeen(ctx)
	if err != nil {
		// One line per outage, not one per listing (storeFailed).
		g.storeFailed("endpoints: the fleet's machines not read; listing the connected ones", err)
		return out
	}
	for name, m := range machines {
		out[name] = m.LastSeen
	}
	return out
}

// withBindings completes GET /api/gateway/machines from the bindings: a
// bound machine says "credential": "token", and a bound name the fleet
// does not remember (its connector never synced) is listed, offline.
func (g *Gateway) withBindings(byName map[string]*FleetMachine) {
	for _, b := range g.bindings.list() {
		m := byName[b.Name]
		if m == nil {
			m = &FleetMachine{Name: b.Name, FirstSeen: isoTimePtr(b.BoundAt), LastSeen: isoTimePtr(b.BoundAt)}
			byName[b.Name] = m
		}
		m.Credential = presence.CredentialToken
	}
}
