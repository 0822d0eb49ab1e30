package api

import (
	"fmt"
	"slices"
	"strings"

	"github.com/uncaged/workflow/shared/origin"
)

// Origins are the browser origins whose pages may call the API: its CORS
// answers name them, and a local listener (connector/cli localOnly)
// refuses a browser's request from any other. The API has no credential
// of its own, so a page it admits can do what the dashboard does on this
// machine; the zero value admits none, the dashboard's dev server
// included — any page on the machine can be served from localhost:5173.
type Origins struct {
	list []string // as a browser writes its Origin header
}

// ParseOrigins reads --allow-origin values: origins
// ("http://localhost:5173", "https://dash.example.com"), each value
// possibly a comma- or space-separated list (the environment variable's
// form). An origin is a scheme (http or https), a host and an optional
// port, with nothing after; scheme and host are lower-cased and a default
// port dropped, as a browser writes its Origin header. "*" and "null"
// are refused: either would admit every page.
func ParseOrigins(values []string) (Origins, error) {
	var o Origins
	for _, v := range values {
		for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			origin, err := normalizeOrigin(s)
			if err != nil {
				return Origins{}, err
			}
			if !slices.Contains(o.list, origin) {
				o.list = append(o.list, origin)
			}
		}
	}
	return o, nil
}

// Admits reports whether a request whose Origin header is origin comes
// from a page o admits. The header is compared as the browser sent it:
// a browser writes it in the normal form ParseOrigins gives the list.
func (o Origins) Admits(origin string) bool { return origin != "" && slices.Contains(o.list, origin) }

// List returns the admitted origins.
func (o Origins) List() []string { return slices.Clone(o.list) }

// normalizeOrigin checks one --allow-origin value and writes it as a
// browser's Origin header would.
func normalizeOrigin(s string) (string, error) {
	if s == "*" || strings.EqualFold(s, "null") {
		return "", fmt.Errorf("origin %q: the local API has no credential of its own, so it admits only origins it is given one by one", s)
	}
	o, err := origin.Normalize(s)
	if err != nil {
		return "", fmt.Errorf("origin %q: %v (an origin is scheme://host[:port], e.g. http://localhost:5173)", s, err)
	}
	return o, nil
}
