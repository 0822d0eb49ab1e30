package legacy

import (
	"sort"
	"time"
)

// URLClient is a registration whose URL the gateway may fetch
// (IsFetchURL), as Registrations.URLClients lists them.
type URLClient struct {
	Name          string
	URL           string
	ClientToken   string
	LastHeartbeat time.Time
}

// URLClient returns name's registration when its URL is one the gateway
// would fetch; ok is false for no registration, or a placeholder URL.
func (rs *Registrations) URLClient(name string) (c URLClient, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rec, found := rs.m[name]
	if !found || !IsFetchURL(rec.url) {
		return URLClient{}, false
	}
	return URLClient{Name: name, URL: rec.url, ClientToken: rec.clientToken, LastHeartbeat: rec.lastHeartbeat}, true
}

// URLClients lists the registrations with a URL the gateway would fetch,
// by name.
func (rs *Registrations) URLClients() []URLClient {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []URLClient
	for name, rec := range rs.m {
		if IsFetchURL(rec.url) {
			out = append(out, URLClient{Name: name, URL: rec.url, ClientToken: rec.clientToken, LastHeartbeat: rec.lastHeartbeat})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
