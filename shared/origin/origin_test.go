package origin

import "testing"

// Origins an operator may write are put in the form a browser sends;
// anything that is not an origin is refused with the reason.
func TestNormalize(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"https://Dash.Example.com", "https://dash.example.com", ""},
		{"HTTP://localhost:5173", "http://localhost:5173", ""},
		{"http://example.com:80", "http://example.com", ""},
		{"https://example.com:443", "https://example.com", ""},
		{"https://example.com:80", "https://example.com:80", ""},
		{"http://[::1]:8080", "http://[::1]:8080", ""},
		{"http://[::1]", "http://[::1]", ""},
		{"ftp://example.com", "", "the scheme must be http or https"},
		{"example.com", "", "the scheme must be http or https"},
		{"https://", "", "no host"},
		{"https:example.com", "", "no host"},
		{"https://user@example.com", "", "an origin has no user"},
		{"https://example.com/", "", "an origin has no path, query or fragment"},
		{"https://example.com?x", "", "an origin has no path, query or fragment"},
		{"https://example.com?", "", "an origin has no path, query or fragment"},
		{"https://example.com#", "", "an origin has no path, query or fragment"},
		{"https://:8080", "", "no host"},
		{"http://%zz", "", "not a URL"},
		{"null", "", "the scheme must be http or https"},
	} {
		got, err := Normalize(c.in)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: %q, %v; want the error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
