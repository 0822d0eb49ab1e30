package deploy

import (
	"cmp"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const composeFile = "../docker-compose.yml"

func loadCompose(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// envNames lists the variable names of a service's environment (map or
// list form).
func envNames(svc any) []string {
	var out []string
	switch env := dig(svc, "environment").(type) {
	case map[string]any:
		for k := range env {
			out = append(out, k)
		}
	case []any:
		for _, e := range env {
			k, _, _ := strings.Cut(e.(string), "=")
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func stringList(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestComposeHangsTogether(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	services := digMap(c, "services")
	if len(services) == 0 {
		t.Fatal("no services")
	}
	gatewaySrc := goSources(t, "../gateway")
	connectorSrc := goSources(t, "../connector") + goSources(t, "../engine")
	caddyfile, err := os.ReadFile("caddy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	gatewayServices := 0
	for name, svc := range services {
		profiles := digList(svc, "profiles")
		// A service in no profile cannot wait for one in a profile: compose
		// would refuse to start without that profile.
		deps := digMap(svc, "depends_on")
		if deps == nil {
			deps = map[string]any{}
			for _, d := range digList(svc, "depends_on") {
				deps[d.(string)] = nil
			}
		}
		for dep := range deps {
			if services[dep] == nil {
				t.Errorf("%s depends on unknown service %s", name, dep)
			} else if len(profiles) == 0 && len(digList(services[dep], "profiles")) > 0 {
				t.Errorf("%s (always on) depends on %s, which only a profile starts", name, dep)
			}
		}
		for _, v := range digList(svc, "volumes") {
			host, _, _ := strings.Cut(v.(string), ":")
			if strings.HasPrefix(host, "./") {
				if _, err := os.Stat(filepath.Join("..", host)); err != nil {
					t.Errorf("%s mounts %s: %v", name, host, err)
				}
			} else if _, ok := digMap(c, "volumes")[host]; !ok {
				t.Errorf("%s mounts volume %s, which is not declared", name, host)
			}
		}
		if df := digString(svc, "build", "dockerfile"); df != "" {
			if _, err := os.Stat(filepath.Join("..", digString(svc, "build", "context"), df)); err != nil {
				t.Errorf("%s builds %s: %v", name, df, err)
			}
		}

		switch digString(svc, "build", "dockerfile") {
		case "deploy/" + dockerfileOf[gatewayBinary]:
			gatewayServices++
			checkArgs(t, "compose "+name+" command", binary(t, gatewayBinary), stringList(dig(svc, "command")))
			for _, env := range envNames(svc) {
				if !readsEnv(gatewaySrc, env) {
					t.Errorf("compose %s sets %s, which the gateway never reads", name, env)
				}
			}
			// Caddy reaches every replica through one alias; each replica
			// advertises its own service name to the others.
			aliases := stringList(dig(svc, "networks", "default", "aliases"))
			if up := digString(services["caddy"], "environment", "UNCAGED_GATEWAY_UPSTREAM"); !slices.Contains(aliases, up) {
				t.Errorf("%s is not reachable as Caddy's upstream %q (aliases %q)", name, up, aliases)
			}
			adv, err := url.Parse(digString(svc, "environment", "UNCAGED_GATEWAY_CLUSTER_ADVERTISE"))
			if err != nil || adv.Hostname() != name || adv.Port() != digString(services["caddy"], "environment", "UNCAGED_GATEWAY_PORT") {
				t.Errorf("%s advertises %v, want http://%s:<the port Caddy uses>", name, adv, name)
			}
		case "deploy/" + dockerfileOf[workflowBinary]:
			entry := stringList(dig(svc, "entrypoint"))
			if entry[len(entry)-2] != "/bin/sh" || entry[len(entry)-1] != "-c" {
				t.Fatalf("%s: entrypoint %q, want ... /bin/sh -c", name, entry)
			}
			words, err := shellWords(stringList(dig(svc, "command"))[0])
			if err != nil {
				t.Fatal(err)
			}
			cmds := commands(words)
			for _, cmd := range cmds {
				if cmd[0] != workflowBinary {
					t.Errorf("%s runs %q", name, cmd)
					continue
				}
				checkArgs(t, "compose "+name+" command", binary(t, workflowBinary), cmd[1:])
			}
			if last := cmds[len(cmds)-1]; len(last) < 2 || last[1] != "connect" {
				t.Errorf("%s does not end by connecting: %q", name, last)
			}
			for _, env := range envNames(svc) {
				if !readsEnv(connectorSrc, env) {
					t.Errorf("compose %s sets %s, which the connector never reads", name, env)
				}
			}
		}
		if strings.HasPrefix(digString(svc, "image"), "caddy:") {
			for _, env := range envNames(svc) {
				if !strings.Contains(string(caddyfile), "{$"+env) {
					t.Errorf("compose %s sets %s, which the Caddyfile never reads", name, env)
				}
			}
		}
	}
	if gatewayServices < 2 {
		t.Errorf("%d gateway services; want the gateway and a cluster replica", gatewayServices)
	}
	src, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	composeStoreChecks(t, c, string(src), gatewayImageEnv(t))
	// docs/deploy.md gives the same .env lines for the cluster profile.
	guide, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	if want, got := composeDatabaseURL.FindString(string(src)), composeDatabaseURL.FindString(string(guide)); want == "" || got != want {
		t.Errorf("docs/deploy.md tells you to put %q in .env; docker-compose.yml, %q", got, want)
	}
}

// gatewayImageEnv is the environment the gateway's image sets (its runtime
// stage's ENV instructions).
func gatewayImageEnv(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile(dockerfileOf[gatewayBinary])
	if err != nil {
		t.Fatal(err)
	}
	ins, err := parseDockerfile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range stages(t, ins)[1].all("ENV") {
		k, v, _ := strings.Cut(e.Args, "=")
		env[k] = v
	}
	return env
}

// composeDatabaseURL finds the example database URL in the file's comments
// (the line that adds it to .env).
var composeDatabaseURL = regexp.MustCompile(`UNCAGED_GATEWAY_DATABASE_URL="(postgres://[^"]+)"`)

// composeStoreChecks checks what the gateway's store needs of the compose
// file (c parsed, src its text): the always-on gateway keeps SQLite on a
// named volume mounted where the image (whose directory belongs to the
// user it runs as) and the variable say; every replica may be given a
// PostgreSQL URL; the cluster replicas wait for a healthy PostgreSQL in
// their profile, which keeps its data on a volume and takes its password
// from .env; and the URL the header tells you to write names that
// service, its user and its database.
func composeStoreChecks(r reporter, c map[string]any, src string, imageEnv map[string]string) {
	services := digMap(c, "services")
	var pg string
	for name, svc := range services {
		if strings.HasPrefix(digString(svc, "image"), "postgres:") {
			pg = name
		}
	}
	if pg == "" {
		r.Errorf("no PostgreSQL service for the cluster profile")
		return
	}
	pgSvc := services[pg]
	if !slices.Contains(digList(pgSvc, "profiles"), any("cluster")) {
		r.Errorf("%s is not in the cluster profile", pg)
	}
	user, db := digString(pgSvc, "environment", "POSTGRES_USER"), digString(pgSvc, "environment", "POSTGRES_DB")
	if pw := digString(pgSvc, "environment", "POSTGRES_PASSWORD"); !strings.HasPrefix(pw, "${") {
		r.Errorf("%s: POSTGRES_PASSWORD %q is written in the file; take it from .env", pg, pw)
	}
	if !slices.Contains(namedVolumeTargets(c, pgSvc), postgresDataDefault) {
		r.Errorf("%s: no named volume on %s: the database would go with the container", pg, postgresDataDefault)
	}
	check := digStrings(pgSvc, "healthcheck", "test")
	if len(check) < 2 || check[0] != "CMD" || check[1] != "pg_isready" {
		r.Errorf("%s: healthcheck %q, want CMD pg_isready ...", pg, check)
	}
	for flag, want := range map[string]string{"--username": user, "--dbname": db} {
		if i := slices.Index(check, flag); i < 0 || i+1 >= len(check) || check[i+1] != want {
			r.Errorf("%s: healthcheck does not check %s %s", pg, flag, want)
		}
	}
	m := composeDatabaseURL.FindStringSubmatch(src)
	if m == nil {
		r.Errorf("the file does not say what UNCAGED_GATEWAY_DATABASE_URL to put in .env")
	} else if u, err := url.Parse(m[1]); err != nil || u.Hostname() != pg || !slices.Contains(digStrings(pgSvc, "expose"), u.Port()) ||
		u.User.Username() != user || strings.TrimPrefix(u.Path, "/") != db {
		r.Errorf("the URL for .env, %s, does not name service %s, an exposed port, user %q and database %q (%v)", m[1], pg, user, db, err)
	}

	for name, svc := range services {
		if digString(svc, "build", "dockerfile") != "deploy/"+dockerfileOf[gatewayBinary] {
			continue
		}
		env := digMap(svc, "environment")
		if _, ok := env["UNCAGED_GATEWAY_DATABASE_URL"]; !ok {
			r.Errorf("%s: no UNCAGED_GATEWAY_DATABASE_URL: it could not join a cluster", name)
		}
		if slices.Contains(digList(svc, "profiles"), any("cluster")) {
			if digString(svc, "depends_on", pg, "condition") != "service_healthy" {
				r.Errorf("%s: does not wait for %s to be healthy", name, pg)
			}
			continue
		}
		dir := cmp.Or(digString(env, "UNCAGED_GATEWAY_DATA_DIR"), imageEnv["UNCAGED_GATEWAY_DATA_DIR"])
		if dir == "" || dir != imageEnv["UNCAGED_GATEWAY_DATA_DIR"] {
			r.Errorf("%s: data directory %q, not the image's %q (made for the user it runs as)", name, dir, imageEnv["UNCAGED_GATEWAY_DATA_DIR"])
		}
		if !slices.Contains(namedVolumeTargets(c, svc), dir) {
			r.Errorf("%s: no named volume on its data directory %s: the store would go with the container", name, dir)
		}
	}
}

// namedVolumeTargets are where a service mounts the named volumes the file
// declares.
func namedVolumeTargets(c map[string]any, svc any) []string {
	var out []string
	for _, v := range digList(svc, "volumes") {
		parts := strings.Split(v.(string), ":")
		if _, ok := digMap(c, "volumes")[parts[0]]; ok && len(parts) > 1 {
			out = append(out, parts[1])
		}
	}
	return out
}

// TestComposeStoreChecksCatchMistakes breaks docker-compose.yml one way at
// a time and expects composeStoreChecks to say what broke.
func TestComposeStoreChecksCatchMistakes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	imageEnv := gatewayImageEnv(t)
	check := func(src string) failures {
		var c map[string]any
		if err := yaml.Unmarshal([]byte(src), &c); err != nil {
			t.Fatal(err)
		}
		var f failures
		composeStoreChecks(&f, c, src, imageEnv)
		return f
	}
	if f := check(src); len(f) > 0 {
		t.Fatalf("docker-compose.yml as it is: %v", f)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"      - gateway-data:/var/lib/uncaged-gateway\n", "      - /tmp:/tmp\n", "no named volume on its data directory"},
		{"UNCAGED_GATEWAY_DATA_DIR: /var/lib/uncaged-gateway", "UNCAGED_GATEWAY_DATA_DIR: /data", `data directory "/data", not the image's`},
		{"      POSTGRES_PASSWORD: ${UNCAGED_POSTGRES_PASSWORD:-}", "      POSTGRES_PASSWORD: hunter2", "written in the file"},
		{"      - postgres-data:/var/lib/postgresql/data\n", "", "the database would go with the container"},
		{`"--dbname", "uncaged"]`, `"--dbname", "postgres"]`, "does not check --dbname uncaged"},
		{"@postgres:5432/uncaged?", "@postgres:5432/gateway?", "does not name service postgres"},
		{"      postgres:\n        condition: service_healthy\n", "      postgres:\n        condition: service_started\n", "does not wait for postgres to be healthy"},
		{"      # Empty: the replica refuses to start, saying cluster mode needs it.\n      UNCAGED_GATEWAY_DATABASE_URL: ${UNCAGED_GATEWAY_DATABASE_URL:-}\n", "", "gateway-2: no UNCAGED_GATEWAY_DATABASE_URL"},
		{"    profiles: [cluster]\n    image: postgres", "    image: postgres", "not in the cluster profile"},
	} {
		if strings.Count(src, tc.old) != 1 {
			t.Errorf("docker-compose.yml does not hold %q exactly once; update this test", tc.old)
			continue
		}
		f := check(strings.Replace(src, tc.old, tc.new, 1))
		if !slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%q for %q: got %q, want a failure saying %q", tc.new, tc.old, f, tc.want)
		}
	}
}

// TestComposeConfigValidates runs `docker-compose config` on every profile
// when docker-compose is installed (CI installs Debian's; the compose
// plugin works too).
func TestComposeConfigValidates(t *testing.T) {
	t.Parallel()
	var base []string
	if p, err := exec.LookPath("docker-compose"); err == nil {
		base = []string{p}
	} else if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "compose", "version").Run() == nil {
		base = []string{p, "compose"}
	} else {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-compose is not installed (.ci/run installs it)")
		}
		t.Skip("docker-compose not installed; apt-get install --no-install-recommends docker-compose")
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(base[0], append(append(base[1:], "-f", composeFile, "--project-directory", ".."), args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	key := []string{"UNCAGED_GATEWAY_KEY=deploy-test-key"}
	for _, profiles := range [][]string{nil, {"demo"}, {"cluster"}, {"demo", "cluster"}} {
		var args []string
		for _, p := range profiles {
			args = append(args, "--profile", p)
		}
		if out, err := run(key, append(args, "config", "-q")...); err != nil {
			t.Errorf("profiles %v: %v\n%s", profiles, err, out)
		}
	}
	out, err := run(key, "--profile", "cluster", "config", "--services")
	if got := strings.Fields(out); err != nil || !slices.Contains(got, "nats") || !slices.Contains(got, "gateway-2") || !slices.Contains(got, "postgres") {
		t.Errorf("cluster profile services: %v %q", err, out)
	}
	// Without the key compose refuses, naming it: no gateway starts with a
	// key nobody chose.
	if out, err := run([]string{"UNCAGED_GATEWAY_KEY="}, "config", "-q"); err == nil || !strings.Contains(out, "UNCAGED_GATEWAY_KEY") {
		t.Errorf("config without a key: %v\n%s", err, out)
	}
}

func TestCaddyfileAdapts(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("caddy")
	if err != nil {
		t.Skip("caddy not installed (e2e's TestThroughCaddy runs it when it is)")
	}
	for _, tc := range []struct {
		domain string
		want   []string
	}{
		{"", []string{`":80"`, `"flush_interval":-1`, `"source":"a"`, `"name":"gateway"`}}, // unset
		{":80", []string{`":80"`, `"flush_interval":-1`}},                                  // compose's default
		{"gw.example.com", []string{`":443"`, `"host":["gw.example.com"]`, `"flush_interval":-1`}},
	} {
		cmd := exec.Command(bin, "adapt", "--config", "caddy/Caddyfile", "--adapter", "caddyfile")
		cmd.Env = os.Environ()
		if tc.domain != "" {
			cmd.Env = append(cmd.Env, "UNCAGED_DOMAIN="+tc.domain)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("domain %q: %v", tc.domain, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("domain %q: config lacks %s:\n%s", tc.domain, w, out)
			}
		}
	}
}
