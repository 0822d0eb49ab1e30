package deploy

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The load balancer configurations for a cluster of replicas: what they
// must say for failover to work and for a replica that comes back to get
// the very next request. e2e's TestClusterBehindNginx and
// TestClusterBehindCaddy run them in front of real replicas.

// nginxBlock is the body of the first block "name {" in an nginx config.
func nginxBlock(conf, name string) string {
	start := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\s*\{`).FindStringIndex(conf)
	if start == nil {
		return ""
	}
	depth := 0
	for i := start[1] - 1; i < len(conf); i++ {
		switch conf[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return conf[start[1]:i]
			}
		}
	}
	return ""
}

// TestNginxClusterConfig: uncaged-gateway-cluster.conf loads (`nginx -t`),
// proxies with proxy.conf's settings to an upstream whose servers are
// never marked down, and passes a failed request on to the next replica
// only as far as that is safe.
func TestNginxClusterConfig(t *testing.T) {
	t.Parallel()
	conf := nginxSiteLoads(t, "nginx/uncaged-gateway-cluster.conf")
	upstream := nginxBlock(conf, "upstream uncaged_gateway")
	servers := nginxDirective(upstream, "server")
	if len(servers) < 2 {
		t.Fatalf("upstream uncaged_gateway lists %d servers, want the replicas: %q", len(servers), upstream)
	}
	for _, s := range servers {
		// nginx would take the replica out for fail_timeout after one
		// failed request otherwise, and answer 502 meanwhile.
		if !slices.Contains(strings.Fields(s), "max_fails=0") {
			t.Errorf("server %s: no max_fails=0", s)
		}
	}
	location := nginxBlock(conf, "location /")
	for name, want := range map[string]string{
		"proxy_pass": "http://uncaged_gateway",
		"include":    "/etc/nginx/conf.d/proxy.conf",
	} {
		if got := nginxDirective(location, name); !slices.Equal(got, []string{want}) {
			t.Errorf("location /: %s %q, want %s", name, got, want)
		}
	}
	next := nginxDirective(location, "proxy_next_upstream")
	if len(next) != 1 {
		t.Fatalf("proxy_next_upstream %q", next)
	}
	cases := strings.Fields(next[0])
	for _, want := range []string{"error", "timeout", "http_502", "http_503"} {
		if !slices.Contains(cases, want) {
			t.Errorf("proxy_next_upstream %q lacks %s", next[0], want)
		}
	}
	// A POST that reached a replica may have started a thread: never again
	// on another one.
	if slices.Contains(cases, "non_idempotent") {
		t.Errorf("proxy_next_upstream %q passes on POSTs that were sent", next[0])
	}
	for _, name := range []string{"proxy_next_upstream_tries", "proxy_next_upstream_timeout"} {
		if len(nginxDirective(location, name)) != 1 {
			t.Errorf("location /: no %s", name)
		}
	}
	// The default, 60 s, is what every request sent to a vanished host
	// would wait before trying the next replica.
	if got := nginxDirective(location, "proxy_connect_timeout"); len(got) != 1 || nginxSeconds(t, got[0]) > 5*time.Second {
		t.Errorf("proxy_connect_timeout %q: want a few seconds at most", got)
	}
	// proxy.conf's Connection header needs the map.
	if !strings.Contains(conf, "map $http_upgrade $connection_upgrade") {
		t.Error("no map for $connection_upgrade")
	}
}

// nginxSeconds reads an nginx time of whole seconds ("3s", "3").
func nginxSeconds(t *testing.T, v string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(v)
	if err != nil {
		d, err = time.ParseDuration(v + "s")
	}
	if err != nil {
		t.Fatalf("time %q: %v", v, err)
	}
	return d
}

// caddyAdapt turns a Caddyfile into Caddy's JSON with env added to the
// environment, and returns its reverse_proxy handler.
func caddyAdapt(t *testing.T, bin, file string, env ...string) (map[string]any, error) {
	t.Helper()
	cmd := exec.Command(bin, "adapt", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, errors.New(string(exit.Stderr))
		}
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	h := findHandler(cfg, "reverse_proxy")
	if h == nil {
		t.Fatalf("%s: no reverse_proxy handler in %s", file, out)
	}
	return h, nil
}

// findHandler finds the first object in a Caddy JSON config whose
// "handler" is name.
func findHandler(v any, name string) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == name {
			return v
		}
		for _, x := range v {
			if h := findHandler(x, name); h != nil {
				return h
			}
		}
	case []any:
		for _, x := range v {
			if h := findHandler(x, name); h != nil {
				return h
			}
		}
	}
	return nil
}

func nanos(v any) time.Duration {
	f, _ := v.(float64)
	return time.Duration(f)
}

// TestCaddyClusterConfig: Caddyfile.cluster proxies to every replica in
// UNCAGED_GATEWAY_REPLICAS, as Caddyfile proxies to one (same streaming
// and headers), checks their /readyz, and retries long enough for a
// replica coming back to get the request that waits for it; `caddy
// validate` accepts it, with and without a domain.
func TestCaddyClusterConfig(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("caddy")
	if err != nil {
		t.Skip("caddy not installed (e2e's TestClusterBehindCaddy runs it when it is)")
	}
	// Loopback ports nothing listens on: validate starts the health
	// checks, which then find nothing.
	replicas := []string{"127.0.0.1:9", "127.0.0.1:10", "127.0.0.1:11"}
	env := "UNCAGED_GATEWAY_REPLICAS=" + strings.Join(replicas, " ")
	h, err := caddyAdapt(t, bin, "caddy/Caddyfile.cluster", env)
	if err != nil {
		t.Fatal(err)
	}
	var dials []string
	for _, u := range digList(h, "upstreams") {
		dials = append(dials, digString(u, "dial"))
	}
	if !slices.Equal(dials, replicas) {
		t.Errorf("upstreams %q, want %q", dials, replicas)
	}
	if _, err := caddyAdapt(t, bin, "caddy/Caddyfile.cluster", "UNCAGED_GATEWAY_REPLICAS="); err == nil {
		t.Error("adapted without replicas")
	}

	single, err := caddyAdapt(t, bin, "caddy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	// The same holds for Caddyfile's passive checks (newer Caddy versions
	// keep them for upstreams found by DNS too).
	if try, failFor := nanos(dig(single, "load_balancing", "try_duration")), nanos(dig(single, "health_checks", "passive", "fail_duration")); try <= failFor {
		t.Errorf("Caddyfile: try_duration %v must exceed fail_duration %v", try, failFor)
	}
	for _, key := range []string{"flush_interval", "headers"} {
		if !reflect.DeepEqual(h[key], single[key]) {
			t.Errorf("%s: %v in the cluster's, %v in Caddyfile", key, h[key], single[key])
		}
	}

	active := digMap(h, "health_checks", "active")
	if digString(active, "uri") != "/readyz" || active["expect_status"] != float64(200) {
		t.Errorf("active health checks %v: want /readyz answering 200", active)
	}
	lb := digMap(h, "load_balancing")
	try := nanos(lb["try_duration"])
	interval := nanos(active["interval"]) + nanos(active["timeout"])
	failFor := nanos(dig(h, "health_checks", "passive", "fail_duration"))
	// A replica back after all were down is marked healthy by the next
	// active check and forgotten as failed after fail_duration: a request
	// that waits for it must wait longer than either.
	if failFor == 0 || interval == 0 || try <= failFor || try <= interval {
		t.Errorf("try_duration %v must exceed fail_duration %v and a health check's interval plus timeout %v", try, failFor, interval)
	}
	if lb["retries"] != nil {
		t.Errorf("retries %v: a count would end the wait before try_duration", lb["retries"])
	}
	if dig(h, "health_checks", "passive", "unhealthy_status") != nil {
		t.Error("passive checks count statuses: a connector's 503 would take its replica out")
	}

	for _, domain := range []string{"", "gw.example.com"} {
		dir := t.TempDir()
		cmd := exec.Command(bin, "validate", "--config", "caddy/Caddyfile.cluster", "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), env, "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		if domain != "" { // an empty one is no site address; unset is port 80
			cmd.Env = append(cmd.Env, "UNCAGED_DOMAIN="+domain)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("caddy validate (domain %q): %v\n%s", domain, err, out)
		}
	}
}
