package deploy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSystemdUnitMatchesServiceInstall: the unit in deploy/systemd runs a
// real command line, and has the same settings `service install` writes.
func TestSystemdUnitMatchesServiceInstall(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("systemd/uncaged-workflow-connect.service")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := parseUnit(string(src))
	if err != nil {
		t.Fatal(err)
	}
	bin := binary(t, workflowBinary)
	exec0 := shipped["Service"]["ExecStart"]
	if len(exec0) != 1 {
		t.Fatalf("ExecStart: %q", exec0)
	}
	words, err := shellWords(strings.ReplaceAll(exec0[0], "%h", "/home/someone"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(words[0]) != workflowBinary || words[1] != "connect" {
		t.Fatalf("ExecStart runs %q", words)
	}
	checkArgs(t, "systemd ExecStart", bin, words[1:])
	if got := shipped["Service"]["Restart"]; !slices.Equal(got, []string{"always"}) {
		t.Errorf("Restart=%q, want always", got)
	}
	if !slices.Contains(words, "--token-file") {
		t.Error("the unit does not read the token from a file")
	}

	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "service", "install", "--dry-run", "--name", "laptop", "--gateway", "https://gw.example.com", "--token-file", token, "--binary", bin)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "UNCAGED_WORKFLOW_STORAGE_ROOT=", "WORKFLOW_STORAGE_ROOT=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("service install --dry-run: %v", err)
	}
	written, err := parseUnit(string(out))
	if err != nil {
		t.Fatalf("the unit service install writes does not parse: %v\n%s", err, out)
	}
	for section, keys := range written {
		for key, vals := range keys {
			if shipped[section][key] == nil {
				t.Errorf("service install sets [%s] %s, the shipped unit does not", section, key)
			} else if key != "ExecStart" && key != "Description" && !slices.Equal(vals, shipped[section][key]) {
				t.Errorf("[%s] %s: service install writes %q, the shipped unit has %q", section, key, vals, shipped[section][key])
			}
		}
	}
	for section, keys := range shipped {
		for key := range keys {
			if written[section][key] == nil {
				t.Errorf("the shipped unit sets [%s] %s, service install does not", section, key)
			}
		}
	}
}

// nginxDirective finds "name value;" in an nginx config.
func nginxDirective(conf, name string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\s+([^;]*);`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(conf, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

func TestNginxProxySettings(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("nginx/proxy.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for name, want := range map[string]string{
		"proxy_http_version":      "1.1",
		"proxy_buffering":         "off",
		"proxy_request_buffering": "off",
		"proxy_read_timeout":      "1h",
		"proxy_send_timeout":      "1h",
	} {
		if got := nginxDirective(conf, name); !slices.Contains(got, want) {
			t.Errorf("proxy.conf: %s %q, want %s", name, got, want)
		}
	}
	headers := strings.Join(nginxDirective(conf, "proxy_set_header"), "\n")
	for _, want := range []string{"Upgrade $http_upgrade", "Connection $connection_upgrade", "X-Forwarded-For $proxy_add_x_forwarded_for", "X-Real-IP $remote_addr", "X-Forwarded-Proto $scheme"} {
		if !strings.Contains(headers, want) {
			t.Errorf("proxy.conf does not set %s", want)
		}
	}
	if got := nginxDirective(conf, "client_max_body_size"); !slices.Equal(got, []string{"8m"}) {
		t.Errorf("client_max_body_size %q: the gateway takes 8 MiB (--max-body)", got)
	}
	if nginxDirective("proxy_buffering on;", "proxy_buffering")[0] != "on" || len(nginxDirective("# proxy_buffering off;", "proxy_buffering")) != 0 {
		t.Error("nginxDirective misreads")
	}
}

// TestNginxSiteConfigLoads runs `nginx -t` on uncaged-gateway.conf, with a
// throwaway certificate in place of the Let's Encrypt paths.
func TestNginxSiteConfigLoads(t *testing.T) {
	t.Parallel()
	site := nginxSiteLoads(t, "nginx/uncaged-gateway.conf")
	if got := nginxDirective(site, "proxy_pass"); !slices.Equal(got, []string{"http://127.0.0.1:8080"}) {
		t.Errorf("proxy_pass %q: the gateway listens on :8080 by default", got)
	}
}

// nginxSiteLoads runs `nginx -t` on the site file (a server block for
// conf.d), with proxy.conf from here and a throwaway certificate in place
// of the Let's Encrypt paths, and returns the file's text. Without nginx
// it checks nothing.
func nginxSiteLoads(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	site := string(b)
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Log("nginx not installed: not loaded")
		return site
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cert, key := selfSigned(t, dir)
	proxyConf, _ := filepath.Abs("nginx/proxy.conf")
	loaded := strings.ReplaceAll(site, "/etc/nginx/conf.d/proxy.conf", proxyConf)
	loaded = regexp.MustCompile(`ssl_certificate\s+\S+;`).ReplaceAllString(loaded, "ssl_certificate "+cert+";")
	loaded = regexp.MustCompile(`ssl_certificate_key\s+\S+;`).ReplaceAllString(loaded, "ssl_certificate_key "+key+";")
	conf := "pid " + dir + "/nginx.pid;\nerror_log " + dir + "/error.log;\nevents {}\nhttp {\n" +
		"client_body_temp_path " + dir + "/body;\nproxy_temp_path " + dir + "/proxy;\n" +
		"fastcgi_temp_path " + dir + "/f;\nuwsgi_temp_path " + dir + "/u;\nscgi_temp_path " + dir + "/s;\naccess_log off;\n" +
		loaded + "\n}\n"
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", path).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t %s: %v\n%s", file, err, out)
	}
	return site
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gw.example.com"},
		DNSNames: []string{"gw.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// metricName finds the metric names registered in Go sources.
var metricName = regexp.MustCompile(`Name:\s*"(uncaged_[a-z_]+)"|NewDesc\(\s*"(uncaged_[a-z_]+)"`)

// TestOperationsDocCoversEveryMetric: docs/operations.md names every
// metric the gateway and the connector register, and no metric that does
// not exist.
func TestOperationsDocCoversEveryMetric(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	src := goSources(t, "../gateway") + goSources(t, "../connector")
	registered := map[string]bool{}
	for _, m := range metricName.FindAllStringSubmatch(src, -1) {
		registered[m[1]+m[2]] = true
	}
	if len(registered) < 5 {
		t.Fatalf("found only %d metrics in the sources: %v", len(registered), registered)
	}
	for name := range registered {
		if !strings.Contains(doc, name) {
			t.Errorf("docs/operations.md does not describe %s", name)
		}
	}
	for _, m := range regexp.MustCompile(`uncaged_[a-z_]+[a-z]`).FindAllString(doc, -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
		if !registered[base] {
			t.Errorf("docs/operations.md names %s, which nothing registers", m)
		}
	}
}

// TestServiceInstallUnitVerifies asks systemd itself about the unit
// `service install` writes, where systemd-analyze is installed.
func TestServiceInstallUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	bin := binary(t, workflowBinary)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "service", "install", "--dry-run", "--name", "laptop", "--gateway", "https://gw.example.com", "--token-file", token, "--binary", bin)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	unit, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "uncaged-workflow-connect.service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if strings.Contains(string(out), "Failed to initialize manager") {
		t.Skipf("systemd-analyze cannot run here: %s", out)
	}
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
}
