package e2e

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// boundsMetric reads one counter or gauge (without labels) from the
// gateway's /metrics.
func boundsMetric(t *testing.T, g *gatewayEnv, name string) float64 {
	t.Helper()
	resp, body := g.do("GET", "/metrics", "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The report: 480 slow bodies from 4 loopback addresses (120 each, under
// the per-address limit) against a gateway limited to 400 descriptors
// stopped /healthz with "accept4: too many open files". Now the gateway
// holds at most its global limit (400 less its reserve), sheds the
// connections that have waited longest on their clients to take new ones,
// and /healthz, a connector's tunnel and the requests proxied through it
// all get through while the slow bodies are held.
func TestSlowBodiesFromManyAddressesUnderADescriptorLimit(t *testing.T) {
	t.Parallel()
	addrs := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}
	dialers := make([]*net.Dialer, len(addrs))
	for i, a := range addrs {
		dialers[i] = loopbackDialer(t, a)
	}
	g := newGateway(t, nil, 400, "--body-timeout", "5m")
	const slow = 480
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, c := range conns {
			_ = c.Close() // most were shed already; this frees this process's end
		}
	}()
	for i := range slow {
		c, err := dialers[i%len(dialers)].Dial("tcp", g.addr)
		if err != nil {
			t.Fatalf("slow body %d: %v", i, err)
		}
		conns = append(conns, c)
		// Written before the gateway may have shed it: a failed write is a
		// closed connection, which is all it can be.
		_, _ = io.WriteString(c, "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	}
	health := &http.Client{Timeout: 10 * time.Second}
	for i := range 3 {
		resp, err := health.Get("http://" + g.addr + "/healthz")
		if err != nil {
			t.Fatalf("/healthz (%d) while %d slow bodies hang: %v", i, slow, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
	}
	// A connector gets its tunnel, and requests through it are served.
	g.connector("alpha", nil)
	for range 3 {
		if resp, body := g.do("GET", "/api/clients/alpha/workflows", ""); resp.StatusCode != 200 {
			t.Fatalf("proxied to the connector while the slow bodies hang: %d %s", resp.StatusCode, body)
		}
	}
	if open := boundsMetric(t, g, "uncaged_gateway_connections_open"); open > 400-64 {
		t.Fatalf("%v connections open under a limit of 400 descriptors", open)
	}
	if shed := boundsMetric(t, g, "uncaged_gateway_connections_shed_total"); shed < slow-(400-64) {
		t.Fatalf("%v connections shed for %d slow bodies", shed, slow)
	}
	logs := g.gw.logs.String()
	if strings.Contains(logs, "too many open files") {
		t.Fatalf("the gateway ran out of descriptors:\n%s", logs)
	}
	// The shedding is told a few times, not once per connection.
	if n := strings.Count(logs, "connection closed to make room"); n > 20 {
		t.Fatalf("%d log lines for the connections shed", n)
	}
}
