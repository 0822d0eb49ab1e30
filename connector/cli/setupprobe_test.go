package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// setup --base-url with a URL nothing answers at says so, and still
// writes the configuration and succeeds; a URL a server answers at, even
// with an error status, gets no warning.
func TestSetupWarnsAboutAnUnreachableBaseURL(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1"
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the probe sent a key: %q", r.Header.Get("Authorization"))
		}
		http.Error(w, `{"error":"no key"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(refusing.Close)

	for _, tc := range []struct {
		url, warning string // "" warns nothing
	}{
		{closed, "warning: could not reach " + closed + ": dial tcp " + strings.TrimSuffix(strings.TrimPrefix(closed, "http://"), "/v1") + ": connect: connection refused\n" +
			"The configuration is written; check the URL (and the network) before running a workflow that calls a model.\n"},
		{refusing.URL + "/v1", ""},
	} {
		c := newCLI(t)
		out, errs, code := c.run("setup", "--provider", "p", "--base-url", tc.url, "--api-key", "k", "--default-model", "p/m")
		if code != 0 || !strings.HasPrefix(out, "wrote registry: ") || errs != tc.warning {
			t.Errorf("setup --base-url %s: exit %d\nstdout %q\nstderr %q\nwant   %q", tc.url, code, out, errs, tc.warning)
		}
		if _, cfg := c.config(t); cfg == nil || cfg.Providers["p"].BaseURL != tc.url {
			t.Errorf("setup --base-url %s did not write the provider: %+v", tc.url, cfg)
		}
	}
}
