// Package nginxconf turns the nginx configurations this repository ships
// (deploy/nginx) into ones that run on loopback for tests and benchmark
// harnesses, changing only what an operator changes: the replicas'
// addresses and the listening ports (plain HTTP where the file has TLS).
// A harness runs what operators run, not a copy of it.
package nginxconf

import (
	"fmt"
	"regexp"
	"strings"
)

// upstreamServer is a server line of an upstream block, its address in
// the second group.
var upstreamServer = regexp.MustCompile(`(?m)^(\s*server\s+)(\S+:\d+)`)

// certificateLine is an ssl_certificate or ssl_certificate_key line.
var certificateLine = regexp.MustCompile(`(?m)^\s*ssl_certificate(_key)?\s.*$`)

// Cluster adapts uncaged-gateway-cluster.conf (site, its text): its
// upstream servers become replicas (as many as it lists), the TLS server
// listens on listen in plain HTTP, the redirecting one on redirect, and
// it includes proxy.conf from proxyConf. It fails when the file no longer
// has what it changes, so a harness never runs a configuration other
// than the shipped one.
func Cluster(site, proxyConf string, replicas []string, listen, redirect string) (string, error) {
	if n := len(upstreamServer.FindAllString(site, -1)); n != len(replicas) {
		return "", fmt.Errorf("the cluster config lists %d replicas, the harness runs %d", n, len(replicas))
	}
	i := 0
	site = upstreamServer.ReplaceAllStringFunc(site, func(line string) string {
		m := upstreamServer.FindStringSubmatch(line)
		i++
		return m[1] + replicas[i-1]
	})
	for old, repl := range map[string]string{
		"/etc/nginx/conf.d/proxy.conf": proxyConf,
		"listen 80;":                   "listen " + redirect + ";",
		"listen 443 ssl http2;":        "listen " + listen + ";",
	} {
		if !strings.Contains(site, old) {
			return "", fmt.Errorf("the cluster config has no %q", old)
		}
		site = strings.ReplaceAll(site, old, repl)
	}
	return certificateLine.ReplaceAllString(site, ""), nil
}

// Main is a whole nginx.conf around site (server and upstream blocks): in
// the foreground, one worker, every file it writes in dir.
func Main(dir, site string) string {
	return fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, site)
}
