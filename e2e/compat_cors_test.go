package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// elsewherePage is a dashboard hosted on another origin than the
// gateway's, as the original deployed its own (built with
// VITE_GATEWAY_URL): it logs in with a bearer token by listing the
// machines, watches a thread's live view at the original dashboard's URL
// (/api/<machine>/threads/<id>/live?key=, without clients/), and tries to
// start a thread with the browser's session cookie instead of the token.
// Each function leaves its outcome in window.results for the test to poll.
const elsewherePage = `<!doctype html>
<meta charset="utf-8"><title>a dashboard elsewhere</title>
<body style="font: 14px monospace"><h1>a dashboard elsewhere</h1><pre id="out"></pre>
<script>
const q = new URLSearchParams(location.search);
const gw = q.get("gw"), token = q.get("token");
const out = document.getElementById("out");
const show = (line) => { out.textContent += line + "\n"; };
window.results = {};
window.listMachines = async () => {
  try {
    const r = await fetch(gw + "/api/gateway/endpoints", { headers: { Authorization: "Bearer " + token } });
    const eps = await r.json();
    window.results.machines = r.status + " " + eps.map((e) => e.name + ":" + e.status).join(",");
  } catch (e) {
    window.results.machines = "error: " + e.message;
  }
  show("machines: " + window.results.machines);
};
window.startByCookie = async () => {
  try {
    const r = await fetch(gw + "/api/clients/laptop/threads", {
      method: "POST", credentials: "include",
      body: JSON.stringify({ workflow: "plan-code-review", prompt: "started by the cookie" }),
    });
    window.results.cookie = "status " + r.status;
  } catch (e) {
    window.results.cookie = "error: " + e.message;
  }
  show("cookie: " + window.results.cookie);
};
window.watchLive = (machine, id) => {
  const live = (window.results.live = { records: [], done: "", errors: 0 });
  const es = new EventSource(gw + "/api/" + machine + "/threads/" + id + "/live?key=" + encodeURIComponent(token));
  es.addEventListener("record", (e) => { live.records.push(JSON.parse(e.data).type); show("record: " + e.data.slice(0, 100)); });
  es.addEventListener("done", (e) => { live.done = JSON.parse(e.data).reason; es.close(); show("done: " + e.data); });
  es.onerror = () => { live.errors++; };
};
</script>
`

// servePage serves elsewherePage on an origin of its own (a loopback port).
func servePage(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, elsewherePage)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDashboardOnAnotherOrigin: a page on an origin the operator listed
// (--allow-origin, here through its variable) logs in with a token, lists
// the machines and follows a thread's live view at the original
// dashboard's URL; the same page on an origin not listed gets nothing
// (the preflight refused: "Failed to fetch"); and the browser's session
// cookie, sent with a listed origin's request, starts nothing.
func TestDashboardOnAnotherOrigin(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	listed, other := servePage(t), servePage(t)
	g := newGateway(t, []string{"UNCAGED_GATEWAY_ALLOW_ORIGIN=" + listed.URL}, 0)
	_, root := g.connector("laptop", map[string]string{"plan-code-review": "linear.esm.js"})
	gw := "http://" + g.front
	page := func(srv *httptest.Server) string {
		return srv.URL + "/?" + url.Values{"gw": {gw}, "token": {g.dash}}.Encode()
	}
	b := newBrowser(t, exe)

	// Listed: the original dashboard's login (a token, the machines).
	b.open(page(listed))
	eval[bool](b, `(window.listMachines(), true)`)
	b.until("the machines to be listed", `window.results.machines`)
	if got := eval[string](b, `window.results.machines`); got != "200 laptop:online" {
		t.Fatalf("listed origin: %q", got)
	}

	// Its live view, at /api/laptop/threads/<id>/live.
	id := g.startThread("laptop", "plan-code-review", "watched from elsewhere")
	finished(t, root, id)
	eval[bool](b, fmt.Sprintf(`(window.watchLive("laptop", %q), true)`, id))
	b.until("the live view to end", `window.results.live.done`)
	if got := eval[string](b, `window.results.live.done + " " + window.results.live.records.join(",")`); !strings.HasPrefix(got, "completed thread-start,") || !strings.HasSuffix(got, ",workflow-result") {
		t.Errorf("live view: %q", got)
	}
	b.shot("compat-cors-listed-origin")

	// The session cookie, which the browser holds for this host and sends
	// to it from the page's origin (same site): refused before anything
	// starts.
	b.open(gw + "/healthz")
	login := fmt.Sprintf(`fetch("/api/gateway/login", {method: "POST", body: JSON.stringify({token: %q})}).then((r) => { window.loginStatus = r.status; }); true`, g.dash)
	eval[bool](b, login)
	b.until("the login on the gateway's own origin", `window.loginStatus === 200`)
	b.open(page(listed))
	eval[bool](b, `(window.startByCookie(), true)`)
	b.until("the cookie request to be answered", `window.results.cookie`)
	if got := eval[string](b, `window.results.cookie`); !strings.HasPrefix(got, "error: ") {
		t.Errorf("the page read the answer to a cookie request: %q", got)
	}
	resp, body := g.do("GET", "/api/clients/laptop/threads", "")
	if resp.StatusCode != 200 || strings.Contains(body, "started by the cookie") {
		t.Errorf("the cookie started a thread: %d %s", resp.StatusCode, body)
	}

	// Not listed: the preflight gets no CORS answer, the fetch fails.
	b.open(page(other))
	eval[bool](b, `(window.listMachines(), true)`)
	b.until("the machines request to fail", `window.results.machines`)
	if got := eval[string](b, `window.results.machines`); !strings.HasPrefix(got, "error: ") {
		t.Errorf("origin not listed: %q", got)
	}
	b.shot("compat-cors-other-origin")
}
