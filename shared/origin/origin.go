// Package origin reads a web origin (scheme://host[:port]) as a browser
// writes it in an Origin header, so that an origin an operator configures
// and the header a page sends compare as strings.
package origin

import (
	"errors"
	"net/url"
	"strings"
)

// Normalize checks s as an origin and writes it in a browser's form: the
// scheme and host in lower case, an IPv6 host in brackets, and the
// scheme's default port left out. The error says what is wrong with s,
// without repeating it.
func Normalize(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", errors.New("the scheme must be http or https")
	case u.Opaque != "" || u.Host == "":
		return "", errors.New("no host")
	case u.User != nil:
		return "", errors.New("an origin has no user")
	case u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#"):
		return "", errors.New("an origin has no path, query or fragment")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", errors.New("no host")
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}
