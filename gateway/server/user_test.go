package server

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// whoAmI is a connector answering every request with every value it got
// under any spelling of tunnel.UserHeader, by header name.
func whoAmI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := map[string][]string{}
		for k, v := range r.Header {
			if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), tunnel.UserHeader) {
				got[k] = v
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(got)
	})
}

// randomCase spells name with each letter's case drawn, and sometimes
// '_' for '-'.
func randomCase(rng *rand.Rand, name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c == '-' && rng.IntN(4) == 0:
			b[i] = '_'
		case rng.IntN(2) == 0:
			b[i] = strings.ToUpper(string(c))[0]
		default:
			b[i] = strings.ToLower(string(c))[0]
		}
	}
	return string(b)
}

// sentUser asks the connector behind path who made the request, with
// credential and, under spellings of the header's name, forged values.
func sentUser(t *testing.T, url, credential string, forged map[string]string) map[string][]string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	for k, v := range forged {
		req.Header[k] = append(req.Header[k], v) // as spelled: the client sends it so
	}
	resp, body := doRequest(t, req)
	var got map[string][]string
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return got
}

// only is the one value the connector got under the header, or a
// description of what it got instead.
func only(got map[string][]string) string {
	if v := got[tunnel.UserHeader]; len(got) == 1 && len(v) == 1 {
		return v[0]
	}
	b, _ := json.Marshal(got)
	return "not one value: " + string(b)
}

// Every proxied request tells the connector who made it, and only that:
// the token's note, else its id, "secret" for the shared secret; values
// a client sent under any spelling of the header are dropped.
func TestUserHeaderNamesTheCredential(t *testing.T) {
	t.Parallel()
	f, st := storedFixture(t)
	f.connector("laptop", whoAmI())
	mint := func(note string) (string, store.Token) {
		tok, rec, err := f.auth.Mint(auth.RoleDashboard, "", time.Hour, note)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateToken(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		return tok, rec
	}
	noted, _ := mint("Ann Example")
	bare, bareRec := mint("")
	unruly, _ := mint("  bob\r\nX-Injected: 1 ")
	rng := rand.New(rand.NewPCG(29, 2))
	for _, c := range []struct {
		name, credential, want string
	}{
		{"a token's note", noted, "Ann Example"},
		{"a token without a note: its id", bare, bareRec.ID},
		{"a note that is no header value, made one", unruly, "bob  X-Injected: 1"},
		{"the shared secret", "shared-secret", UserSecret},
		{"a token without an id", f.dash, userAnonymous},
	} {
		for i := range 8 {
			forged := map[string]string{}
			for j := range rng.IntN(3) {
				forged[randomCase(rng, tunnel.UserHeader)] = "mallory" + string(rune('0'+j))
			}
			path := []string{"/api/clients/laptop/threads/T1/question", "/api/agents/laptop/whoami", "/api/laptop/threads/T1/live"}[i%3]
			got := sentUser(t, f.srv.URL+path, c.credential, forged)
			if only(got) != c.want {
				t.Errorf("%s, %s, forged %v: the connector got %v, want %s: [%s]", c.name, path, forged, got, tunnel.UserHeader, c.want)
			}
		}
	}
}

// setUser drops every spelling of the header, canonical or not, keeps
// every other header, and sets one value.
func TestUserHeaderReplacesEverySpelling(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	for range 200 {
		h := http.Header{"Accept": {"application/json"}, "X-Uncaged-Users": {"kept"}, "X-Uncaged-Use": {"kept"}}
		for range 1 + rng.IntN(3) {
			k := randomCase(rng, tunnel.UserHeader)
			h[k] = append(h[k], "mallory")
		}
		setUser(h, "ann")
		if len(h) != 4 || h.Get("Accept") != "application/json" || h.Get("X-Uncaged-Users") != "kept" || h.Get("X-Uncaged-Use") != "kept" ||
			len(h[tunnel.UserHeader]) != 1 || h[tunnel.UserHeader][0] != "ann" {
			t.Fatalf("%v", h)
		}
	}
	h := http.Header{"x-uncaged-user": {"mallory"}}
	if setUser(h, ""); len(h) != 0 {
		t.Fatalf("no user, yet %v", h)
	}
}

func TestUserHeaderText(t *testing.T) {
	for in, want := range map[string]string{
		"ann":                          "ann",
		"  ann  ":                      "ann",
		"a\tb\nc\x7fd\x00e":            "a b c d e",
		"日本\xff":                       "日本\uFFFD",
		strings.Repeat("é", 200):       strings.Repeat("é", maxUserBytes/2),
		"x" + strings.Repeat("é", 200): "x" + strings.Repeat("é", (maxUserBytes-1)/2),
	} {
		if got := headerText(in); got != want {
			t.Errorf("headerText(%q) = %q, want %q", in, got, want)
		}
	}
}

// In cluster mode the replica a request entered decides who made it; the
// replica holding the tunnel keeps that over the authenticated hop, and
// decides itself for a request that did not come over one.
func TestUserHeaderAcrossReplicas(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	r1.connector("laptop", whoAmI())
	r2.waitHeld("laptop", "r1")
	rng := rand.New(rand.NewPCG(29, 4))

	// Through r2: r2 decides, whatever the client sent.
	forged := map[string]string{randomCase(rng, tunnel.UserHeader): "mallory"}
	if got := sentUser(t, r2.srv.URL+"/api/clients/laptop/whoami", "shared-secret", forged); only(got) != UserSecret {
		t.Fatalf("via r2 with the secret: %v", got)
	}
	if got := sentUser(t, r2.srv.URL+"/api/clients/laptop/whoami", r2.dash, forged); only(got) != userAnonymous {
		t.Fatalf("via r2 with a token: %v", got)
	}
	// Straight to r1, no hop: r1 decides.
	if got := sentUser(t, r1.srv.URL+"/api/clients/laptop/whoami", "shared-secret", forged); only(got) != UserSecret {
		t.Fatalf("straight to r1: %v", got)
	}
	// What the entry replica set is kept by the holder, even where the
	// holder would have said otherwise: it is r2's word, over a hop r1
	// verified.
	cl := r2.gw.opts.Cluster
	route, known := cl.Lookup("laptop")
	if !known || !route.Online {
		t.Fatalf("r2 does not know where laptop is: %+v", route)
	}
	req := httptest.NewRequest("GET", "/api/clients/laptop/whoami", nil)
	req.Header.Set("Authorization", "Bearer shared-secret")
	req.Header.Set(tunnel.UserHeader, "ann, as r2 decided")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	rec := httptest.NewRecorder()
	if cl.Forward(rec, req.WithContext(ctx), route) != cluster.Answered {
		t.Fatal("r1 unreached")
	}
	var got map[string][]string
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil || only(got) != "ann, as r2 decided" {
		t.Fatalf("over the hop: %d %s", rec.Code, rec.Body.String())
	}
	// A hop that does not verify carries nothing to the connector.
	req2, _ := http.NewRequest("GET", r1.srv.URL+"/api/clients/laptop/whoami", nil)
	req2.Header.Set("Authorization", "Bearer shared-secret")
	req2.Header.Set(cluster.HopHeader, "1.abc.r2")
	req2.Header.Set(tunnel.UserHeader, "mallory")
	if resp, body := doRequest(t, req2); resp.StatusCode != 401 || strings.Contains(body, "mallory") {
		t.Fatalf("forged hop: %d %s", resp.StatusCode, body)
	}
}
