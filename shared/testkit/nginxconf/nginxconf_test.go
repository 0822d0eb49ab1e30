package nginxconf

import (
	"os"
	"strings"
	"testing"
)

// The shipped cluster configuration adapts; one that lost what the
// adaptation changes, or lists another number of replicas, is refused
// with the reason, never run half-changed.
func TestClusterAdaptsTheShippedFileAndRefusesAnyOther(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/nginx/uncaged-gateway-cluster.conf")
	if err != nil {
		t.Fatal(err)
	}
	shipped := string(b)
	replicas := []string{"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"}
	site, err := Cluster(shipped, "/x/proxy.conf", replicas, "127.0.0.1:2000", "127.0.0.1:2001")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"listen 127.0.0.1:2000;", "listen 127.0.0.1:2001;", "include /x/proxy.conf;"}, replicas...) {
		if !strings.Contains(site, want) {
			t.Errorf("adapted config lacks %q", want)
		}
	}
	if strings.Contains(site, "ssl_certificate") || strings.Contains(site, "10.0.0.1") {
		t.Errorf("adapted config keeps TLS or the example addresses:\n%s", site)
	}
	for name, c := range map[string]struct {
		site     string
		replicas []string
		want     string
	}{
		"two replicas":         {shipped, replicas[:2], "lists 3 replicas, the harness runs 2"},
		"four replicas":        {shipped, append(replicas, "127.0.0.1:1004"), "lists 3 replicas, the harness runs 4"},
		"no TLS listener":      {strings.Replace(shipped, "listen 443 ssl http2;", "listen 443 ssl;", 1), replicas, `no "listen 443 ssl http2;"`},
		"no redirect listener": {strings.Replace(shipped, "listen 80;", "listen 8080;", 1), replicas, `no "listen 80;"`},
		"proxy.conf elsewhere": {strings.Replace(shipped, "/etc/nginx/conf.d/proxy.conf", "proxy.conf", 1), replicas, "proxy.conf"},
		"empty":                {"", replicas, "lists 0 replicas"},
	} {
		if _, err := Cluster(c.site, "/x/proxy.conf", c.replicas, "127.0.0.1:2000", "127.0.0.1:2001"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one saying %q", name, err, c.want)
		}
	}
}
