package deploy

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// object is one Kubernetes manifest document and the file it came from.
type object struct {
	doc  map[string]any
	file string
}

func (o object) kind() string { return digString(o.doc, "kind") }
func (o object) name() string { return digString(o.doc, "metadata", "name") }

// loadK8s reads the manifests kustomization.yaml lists, and checks that
// every manifest in the directory is listed.
func loadK8s(t *testing.T) (objs []object, kustomization map[string]any) {
	t.Helper()
	b, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &kustomization); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, r := range digList(kustomization, "resources") {
		file := r.(string)
		listed[file] = true
		b, err := os.ReadFile(filepath.Join("k8s", file))
		if err != nil {
			t.Fatalf("kustomization lists %s: %v", file, err)
		}
		docs, err := yamlDocs(b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, d := range docs {
			objs = append(objs, object{doc: d, file: file})
		}
	}
	all, _ := filepath.Glob("k8s/*.yaml")
	for _, f := range all {
		if base := filepath.Base(f); base != "kustomization.yaml" && !listed[base] {
			t.Errorf("k8s/%s is not in kustomization.yaml", base)
		}
	}
	return objs, kustomization
}

// subset: every label of sel is on labels.
func subset(sel, labels map[string]any) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a port reference (name or number) among a pod's
// container ports.
func containerPort(pod any, ref any) (int, bool) {
	for _, c := range digList(pod, "containers") {
		for _, p := range digList(c, "ports") {
			n, _ := dig(p, "containerPort").(int)
			switch r := ref.(type) {
			case string:
				if digString(p, "name") == r {
					return n, true
				}
			case int:
				if n == r {
					return n, true
				}
			}
		}
	}
	return 0, false
}

// gatewayRoutes are the unauthenticated GET routes a probe may use; each
// must be registered in gateway/server.
var gatewayRoutes = []string{"/healthz", "/readyz"}

var podVarRef = regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`)

func TestK8sManifestsHangTogether(t *testing.T) {
	t.Parallel()
	objs, kustomization := loadK8s(t)
	byKind := map[string][]object{}
	for _, o := range objs {
		if o.kind() == "" || digString(o.doc, "apiVersion") == "" || o.name() == "" {
			t.Errorf("%s: a document without kind, apiVersion or name", o.file)
		}
		byKind[o.kind()] = append(byKind[o.kind()], o)
	}
	gatewaySrc := goSources(t, "../gateway")
	for _, r := range gatewayRoutes {
		if !strings.Contains(gatewaySrc, `e.GET("`+r+`"`) {
			t.Fatalf("the gateway no longer serves %s", r)
		}
	}
	images := map[string]bool{}
	for _, img := range digList(kustomization, "images") {
		images[digString(img, "name")] = true
	}

	deployments := byKind["Deployment"]
	if len(deployments) < 2 {
		t.Fatalf("%d Deployments; want the gateway and NATS", len(deployments))
	}
	// Workloads: what runs pods a Service may select.
	workloads := append(append([]object{}, deployments...), byKind["StatefulSet"]...)
	sources := map[string]string{}
	for _, o := range objs {
		if _, ok := sources[o.file]; !ok {
			b, err := os.ReadFile(filepath.Join("k8s", o.file))
			if err != nil {
				t.Fatal(err)
			}
			sources[o.file] = string(b)
		}
	}
	sawGateway := false
	for _, d := range workloads {
		where := d.file + " " + d.kind() + " " + d.name()
		pod := dig(d.doc, "spec", "template", "spec")
		labels := digMap(d.doc, "spec", "template", "metadata", "labels")
		if !subset(digMap(d.doc, "spec", "selector", "matchLabels"), labels) {
			t.Errorf("%s: selector %v does not select its pods %v", where, dig(d.doc, "spec", "selector"), labels)
		}
		if dig(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: pods may run as root", where)
		}
		volumes, claims := podVolumes(d)
		if d.kind() == "StatefulSet" {
			svc := findObject(byKind["Service"], digString(d.doc, "spec", "serviceName"))
			if svc == nil || !subset(digMap(svc.doc, "spec", "selector"), labels) {
				t.Errorf("%s: serviceName %q is no Service selecting its pods", where, digString(d.doc, "spec", "serviceName"))
			}
		}
		for _, c := range digList(pod, "containers") {
			cwhere := where + " container " + digString(c, "name")
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				checkProbe(t, cwhere+" "+probe, pod, dig(c, probe))
			}
			for _, m := range digList(c, "volumeMounts") {
				if name := digString(m, "name"); volumes[name] == nil && !claims[name] {
					t.Errorf("%s: mounts %q, which is neither a volume of the pod nor a claim template", cwhere, name)
				}
			}
			if digString(c, "image") != "uncaged-gateway" {
				continue
			}
			sawGateway = true
			if !images["uncaged-gateway"] {
				t.Errorf("kustomization.yaml does not set the uncaged-gateway image")
			}
			if got := digString(c, "readinessProbe", "httpGet", "path"); got != "/readyz" {
				t.Errorf("%s: readiness on %q, want /readyz", cwhere, got)
			}
			if got := digString(c, "livenessProbe", "httpGet", "path"); !slices.Contains(gatewayRoutes, got) {
				t.Errorf("%s: liveness on %q, not a gateway route", cwhere, got)
			}
			args := stringList(dig(c, "args"))
			checkArgs(t, cwhere, binary(t, gatewayBinary), args)
			defined := map[string]bool{}
			for _, e := range digList(c, "env") {
				defined[digString(e, "name")] = true
			}
			referenced := map[string]bool{}
			for _, a := range args {
				for _, m := range podVarRef.FindAllStringSubmatch(a, -1) {
					referenced[m[1]] = true
					if !defined[m[1]] {
						t.Errorf("%s: args use $(%s), which the container does not define", cwhere, m[1])
					}
				}
			}
			for name := range defined {
				if !referenced[name] && !readsEnv(gatewaySrc, name) {
					t.Errorf("%s: sets %s, which neither the args nor the gateway use", cwhere, name)
				}
			}
			// The listen port is the container port the probes use.
			listen := args[slices.Index(args, "--listen")+1]
			port, _ := containerPort(pod, "http")
			if !strings.HasSuffix(listen, ":"+strconv.Itoa(port)) {
				t.Errorf("%s: listens on %s, but the http port is %d", cwhere, listen, port)
			}
			// --nats names a Service and one of its ports.
			nats, err := url.Parse(args[slices.Index(args, "--nats")+1])
			if err != nil {
				t.Fatal(err)
			}
			if !serviceHasPort(byKind["Service"], nats.Hostname(), nats.Port()) {
				t.Errorf("%s: --nats %s is no Service port", cwhere, nats)
			}
		}
	}
	if !sawGateway {
		t.Fatal("no Deployment runs uncaged-gateway")
	}
	storeChecks(t, objs, sources)

	services := byKind["Service"]
	for _, s := range services {
		where := s.file + " Service " + s.name()
		var target *object
		for i, d := range workloads {
			if subset(digMap(s.doc, "spec", "selector"), digMap(d.doc, "spec", "template", "metadata", "labels")) {
				target = &workloads[i]
			}
		}
		if target == nil {
			t.Errorf("%s: selector %v matches no workload's pods", where, dig(s.doc, "spec", "selector"))
			continue
		}
		for _, p := range digList(s.doc, "spec", "ports") {
			if _, ok := containerPort(dig(target.doc, "spec", "template", "spec"), dig(p, "targetPort")); !ok {
				t.Errorf("%s: targetPort %v is no container port of %s", where, dig(p, "targetPort"), target.name())
			}
		}
	}
	for _, p := range byKind["PodDisruptionBudget"] {
		ok := false
		for _, d := range workloads {
			ok = ok || subset(digMap(p.doc, "spec", "selector", "matchLabels"), digMap(d.doc, "spec", "template", "metadata", "labels"))
		}
		if !ok {
			t.Errorf("PodDisruptionBudget %s selects nothing", p.name())
		}
	}

	ingresses := byKind["Ingress"]
	if len(ingresses) == 0 {
		t.Fatal("no Ingress")
	}
	for _, in := range ingresses {
		ann := digMap(in.doc, "metadata", "annotations")
		for _, key := range []string{"nginx.ingress.kubernetes.io/proxy-read-timeout", "nginx.ingress.kubernetes.io/proxy-send-timeout"} {
			if n, err := strconv.Atoi(fmt.Sprint(ann[key])); err != nil || n < 3600 {
				t.Errorf("Ingress %s: %s = %v; tunnels and streams need an hour", in.name(), key, ann[key])
			}
		}
		if ann["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
			t.Errorf("Ingress %s buffers responses: live streams would stall", in.name())
		}
		for _, rule := range digList(in.doc, "spec", "rules") {
			for _, p := range digList(rule, "http", "paths") {
				svc := digString(p, "backend", "service", "name")
				port := dig(p, "backend", "service", "port", "name")
				if port == nil {
					port = dig(p, "backend", "service", "port", "number")
				}
				if !serviceHasPort(services, svc, fmt.Sprint(port)) {
					t.Errorf("Ingress %s: backend %s:%v is no Service port", in.name(), svc, port)
				}
			}
		}
	}
}

// podVolumes are a workload's pod volumes by name, and the names of its
// volume claim templates (a StatefulSet's).
func podVolumes(w object) (volumes map[string]any, claims map[string]bool) {
	volumes, claims = map[string]any{}, map[string]bool{}
	for _, v := range digList(w.doc, "spec", "template", "spec", "volumes") {
		volumes[digString(v, "name")] = v
	}
	for _, c := range digList(w.doc, "spec", "volumeClaimTemplates") {
		claims[digString(c, "metadata", "name")] = true
	}
	return volumes, claims
}

// storeChecks checks what the gateway's store needs of the manifests
// (sources: file name -> text, for the comments): every Secret a container
// needs is one its file says how to create, with the keys it uses; the
// PostgreSQL workload keeps its data on a claim; and the gateway, whose
// cluster mode refuses to start without PostgreSQL, reads a URL naming
// that database from a mounted key of its Secret.
func storeChecks(r reporter, objs []object, sources map[string]string) {
	var workloads, services []object
	for _, o := range objs {
		switch o.kind() {
		case "Deployment", "StatefulSet":
			workloads = append(workloads, o)
		case "Service":
			services = append(services, o)
		}
	}
	sawGateway, sawPostgres := false, false
	for _, w := range workloads {
		volumes, claims := podVolumes(w)
		for _, c := range digList(w.doc, "spec", "template", "spec", "containers") {
			where := w.file + " " + w.kind() + " " + w.name() + " container " + digString(c, "name")
			mounts := map[string]string{} // mount path -> volume
			for _, m := range digList(c, "volumeMounts") {
				mounts[digString(m, "mountPath")] = digString(m, "name")
			}
			for _, ref := range secretRefs(c, volumes) {
				checkSecretDocumented(r, where, sources[w.file], ref)
			}
			switch img := digString(c, "image"); {
			case strings.HasPrefix(img, "postgres:"):
				sawPostgres = true
				checkPostgresContainer(r, where, c, mounts, claims)
			case img == "uncaged-gateway":
				sawGateway = true
				checkDatabaseURL(r, where, c, mounts, volumes, sources[w.file], workloads, services, sources)
			}
		}
	}
	if !sawGateway || !sawPostgres {
		r.Errorf("no gateway (%v) or no PostgreSQL (%v) for its cluster mode", sawGateway, sawPostgres)
	}
}

// findObject is the object of objs with that name, or nil.
func findObject(objs []object, name string) *object {
	for i := range objs {
		if objs[i].name() == name {
			return &objs[i]
		}
	}
	return nil
}

// checkProbe reports unless probe exists and is an HTTP GET or TCP check
// of one of the pod's container ports, or a command to run.
func checkProbe(r reporter, where string, pod, probe any) {
	switch {
	case probe == nil:
		r.Errorf("%s: missing", where)
	case dig(probe, "httpGet") != nil:
		if _, ok := containerPort(pod, dig(probe, "httpGet", "port")); !ok {
			r.Errorf("%s: port %v is no container port", where, dig(probe, "httpGet", "port"))
		}
	case dig(probe, "tcpSocket") != nil:
		if _, ok := containerPort(pod, dig(probe, "tcpSocket", "port")); !ok {
			r.Errorf("%s: port %v is no container port", where, dig(probe, "tcpSocket", "port"))
		}
	case len(digList(probe, "exec", "command")) == 0:
		r.Errorf("%s: neither httpGet, tcpSocket nor exec", where)
	}
}

// secretRef is one key of a Secret a container needs; key "" means the
// whole Secret.
type secretRef struct{ secret, key string }

// secretRefs lists the Secrets a container cannot start without: its
// environment's secretKeyRefs that are not optional, and the Secret
// volumes it mounts (their items' keys, or the whole Secret).
func secretRefs(c any, volumes map[string]any) []secretRef {
	var out []secretRef
	for _, e := range digList(c, "env") {
		if ref := dig(e, "valueFrom", "secretKeyRef"); ref != nil && dig(ref, "optional") != true {
			out = append(out, secretRef{digString(ref, "name"), digString(ref, "key")})
		}
	}
	for _, m := range digList(c, "volumeMounts") {
		sec := dig(volumes[digString(m, "name")], "secret")
		if sec == nil || dig(sec, "optional") == true {
			continue
		}
		items := digList(sec, "items")
		if len(items) == 0 {
			out = append(out, secretRef{digString(sec, "secretName"), ""})
		}
		for _, it := range items {
			out = append(out, secretRef{digString(sec, "secretName"), digString(it, "key")})
		}
	}
	return out
}

var createSecret = regexp.MustCompile(`create secret generic (\S+)`)

// secretCreation finds, in a manifest's comments, the kubectl command that
// creates the Secret name, and returns the keys it creates with their
// values as written (--from-literal=KEY=VALUE; --from-file gives the key
// and an empty value). A command may continue over lines ending in \.
func secretCreation(src, name string) (map[string]string, bool) {
	lines := strings.Split(src, "\n")
	text := func(line string) string {
		return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
	}
	for i, line := range lines {
		m := createSecret.FindStringSubmatch(text(line))
		if m == nil || m[1] != name {
			continue
		}
		var b strings.Builder
		for _, l := range lines[i:] {
			t := text(l)
			b.WriteString(strings.TrimSuffix(t, `\`) + " ")
			if !strings.HasSuffix(t, `\`) {
				break
			}
		}
		words, err := shellWords(b.String())
		if err != nil {
			return nil, false
		}
		keys := map[string]string{}
		for _, w := range words {
			if rest, ok := strings.CutPrefix(w, "--from-literal="); ok {
				k, v, _ := strings.Cut(rest, "=")
				keys[k] = v
			} else if rest, ok := strings.CutPrefix(w, "--from-file="); ok {
				k, _, hasKey := strings.Cut(rest, "=")
				if !hasKey {
					k = path.Base(rest)
				}
				keys[k] = ""
			}
		}
		return keys, true
	}
	return nil, false
}

// checkSecretDocumented reports unless src (the manifest's file) says how
// to create the Secret ref names, with the key it needs.
func checkSecretDocumented(r reporter, where, src string, ref secretRef) {
	keys, ok := secretCreation(src, ref.secret)
	if !ok {
		r.Errorf("%s: uses Secret %s, but its file does not say how to create it (kubectl create secret generic %s ...)", where, ref.secret, ref.secret)
		return
	}
	if _, ok := keys[ref.key]; ref.key != "" && !ok {
		r.Errorf("%s: uses key %q of Secret %s, which the command creating it does not create", where, ref.key, ref.secret)
	}
}

// digStrings is the list of strings at path, nil where there is none.
func digStrings(v any, path ...any) []string {
	var out []string
	for _, x := range digList(v, path...) {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// envValues maps a container's variables to their literal values; those
// taken from elsewhere (valueFrom) map to "".
func envValues(c any) map[string]string {
	out := map[string]string{}
	for _, e := range digList(c, "env") {
		out[digString(e, "name")] = digString(e, "value")
	}
	return out
}

// postgresDataDefault is PGDATA in the official image up to 17 (18 moved it
// under a versioned directory): bumping the image's major version means
// checking where its data goes.
const postgresDataDefault = "/var/lib/postgresql/data"

// checkPostgresContainer reports unless a PostgreSQL container keeps its
// data on a persistent claim, takes its password from a Secret, and checks
// (and stops) the database and user it creates.
func checkPostgresContainer(r reporter, where string, c any, mounts map[string]string, claims map[string]bool) {
	env := envValues(c)
	user, db := env["POSTGRES_USER"], env["POSTGRES_DB"]
	if user == "" || db == "" {
		r.Errorf("%s: POSTGRES_USER and POSTGRES_DB must be set: the gateway's URL names them", where)
	}
	if _, ok := env["POSTGRES_PASSWORD"]; !ok || env["POSTGRES_PASSWORD"] != "" {
		r.Errorf("%s: POSTGRES_PASSWORD must come from a Secret, not the manifest", where)
	}
	if major, _, _ := strings.Cut(strings.TrimPrefix(digString(c, "image"), "postgres:"), "."); major >= "18" || len(major) != 2 {
		r.Errorf("%s: image %s: check where this version keeps its data before using it", where, digString(c, "image"))
	}
	pgdata := cmp.Or(env["PGDATA"], postgresDataDefault)
	persistent := false
	for mount, vol := range mounts {
		if claims[vol] && (pgdata == mount || strings.HasPrefix(pgdata, mount+"/")) {
			persistent = true
		}
	}
	if !persistent {
		r.Errorf("%s: PGDATA %s is not on a volume claim: the database would go with the pod", where, pgdata)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		cmdline := digStrings(c, probe, "exec", "command")
		for flag, want := range map[string]string{"--username": user, "--dbname": db} {
			if i := slices.Index(cmdline, flag); i >= 0 && (i+1 >= len(cmdline) || cmdline[i+1] != want) {
				r.Errorf("%s: %s checks %s %v, want %s", where, probe, flag, cmdline[i+1:], want)
			}
		}
	}
	stop := digStrings(c, "lifecycle", "preStop", "exec", "command")
	if i := slices.Index(stop, "--pgdata"); i >= 0 && (i+1 >= len(stop) || stop[i+1] != pgdata) {
		r.Errorf("%s: preStop stops %v, not PGDATA %s", where, stop[i+1:], pgdata)
	}
}

// checkDatabaseURL reports unless the gateway container reads its database
// URL from the file UNCAGED_GATEWAY_DATABASE_URL_FILE names (a variable,
// so that commands run in the container with kubectl exec, such as token
// create, use the same database), that file is a mounted key of a Secret
// its manifest says how to create, and the URL there names a Service port
// of a PostgreSQL workload with that workload's user, database and
// password.
func checkDatabaseURL(r reporter, where string, c any, mounts map[string]string, volumes map[string]any, src string, workloads, services []object, sources map[string]string) {
	file := envValues(c)["UNCAGED_GATEWAY_DATABASE_URL_FILE"]
	if file == "" {
		r.Errorf("%s: cluster mode without UNCAGED_GATEWAY_DATABASE_URL_FILE: the replicas would refuse to start", where)
		return
	}
	if args := stringList(dig(c, "args")); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--database-url") }) {
		r.Errorf("%s: a --database-url flag in the args: kubectl exec's token commands would not see it", where)
	}
	sec := dig(volumes[mounts[path.Dir(file)]], "secret")
	key := ""
	for _, it := range digList(sec, "items") {
		if digString(it, "path") == path.Base(file) {
			key = digString(it, "key")
		}
	}
	if sec == nil || key == "" {
		r.Errorf("%s: --database-url-file %s is no mounted key of a Secret", where, file)
		return
	}
	keys, _ := secretCreation(src, digString(sec, "secretName"))
	u, err := url.Parse(keys[key])
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		r.Errorf("%s: key %s of Secret %s is created as %q, not a postgres:// URL (%v)", where, key, digString(sec, "secretName"), keys[key], err)
		return
	}
	if !serviceHasPort(services, u.Hostname(), u.Port()) {
		r.Errorf("%s: the database URL's %s:%s is no Service port", where, u.Hostname(), u.Port())
		return
	}
	svc := findObject(services, u.Hostname())
	for _, w := range workloads {
		if !subset(digMap(svc.doc, "spec", "selector"), digMap(w.doc, "spec", "template", "metadata", "labels")) {
			continue
		}
		for _, c := range digList(w.doc, "spec", "template", "spec", "containers") {
			env := envValues(c)
			if !strings.HasPrefix(digString(c, "image"), "postgres:") {
				continue
			}
			if u.User.Username() != env["POSTGRES_USER"] || strings.TrimPrefix(u.Path, "/") != env["POSTGRES_DB"] {
				r.Errorf("%s: the database URL logs in as %q to %q; %s creates user %q and database %q", where, u.User.Username(), strings.TrimPrefix(u.Path, "/"), w.name(), env["POSTGRES_USER"], env["POSTGRES_DB"])
			}
			for _, e := range digList(c, "env") {
				ref := dig(e, "valueFrom", "secretKeyRef")
				if digString(e, "name") != "POSTGRES_PASSWORD" || ref == nil {
					continue
				}
				pgKeys, _ := secretCreation(sources[w.file], digString(ref, "name"))
				if pw, _ := u.User.Password(); pw == "" || pw != pgKeys[digString(ref, "key")] {
					r.Errorf("%s: the database URL's password %q is not the one %s's Secret is created with (%q)", where, pw, w.name(), pgKeys[digString(ref, "key")])
				}
			}
			return
		}
	}
	r.Errorf("%s: the database URL's Service %s runs no PostgreSQL", where, u.Hostname())
}

// serviceHasPort: a Service name with a port of that name or number.
func serviceHasPort(services []object, name, port string) bool {
	for _, s := range services {
		if s.name() != name {
			continue
		}
		for _, p := range digList(s.doc, "spec", "ports") {
			if digString(p, "name") == port || fmt.Sprint(dig(p, "port")) == port {
				return true
			}
		}
	}
	return false
}

func TestK8sChecksCatchMismatches(t *testing.T) {
	t.Parallel()
	pod := map[string]any{"containers": []any{map[string]any{"ports": []any{map[string]any{"name": "http", "containerPort": 8080}}}}}
	if _, ok := containerPort(pod, "htp"); ok {
		t.Error("a misspelt port name resolved")
	}
	if _, ok := containerPort(pod, 8081); ok {
		t.Error("a wrong port number resolved")
	}
	if n, ok := containerPort(pod, "http"); !ok || n != 8080 {
		t.Error("the named port did not resolve")
	}
	if subset(map[string]any{}, map[string]any{"a": "b"}) {
		t.Error("an empty selector counts as selecting")
	}
	if subset(map[string]any{"a": "c"}, map[string]any{"a": "b"}) {
		t.Error("a wrong label value matched")
	}
	svc := []object{{doc: map[string]any{"metadata": map[string]any{"name": "nats"}, "spec": map[string]any{"ports": []any{map[string]any{"name": "client", "port": 4222}}}}}}
	if !serviceHasPort(svc, "nats", "4222") || !serviceHasPort(svc, "nats", "client") || serviceHasPort(svc, "nats", "4223") || serviceHasPort(svc, "natz", "4222") {
		t.Error("serviceHasPort")
	}
}

// TestK8sKustomizeBuilds renders the directory with kubectl when it is
// installed (offline: no cluster needed).
func TestK8sKustomizeBuilds(t *testing.T) {
	t.Parallel()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command(kubectl, "kustomize", "k8s").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "image: registry.example.com/uncaged-gateway:dev") || !strings.Contains(string(out), "namespace: uncaged") {
		t.Errorf("kustomize output lacks the image or the namespace:\n%s", out)
	}
}

// loadK8sSources reads every manifest in k8s/ but kustomization.yaml, by
// file name.
func loadK8sSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// parseK8sSources decodes the manifests of sources.
func parseK8sSources(t *testing.T, sources map[string]string) []object {
	t.Helper()
	var objs []object
	for file, src := range sources {
		docs, err := yamlDocs([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, d := range docs {
			objs = append(objs, object{doc: d, file: file})
		}
	}
	return objs
}

// TestK8sStoreChecksCatchMistakes breaks the real manifests one way at a
// time and expects storeChecks to say what broke.
func TestK8sStoreChecksCatchMistakes(t *testing.T) {
	t.Parallel()
	sources := loadK8sSources(t)
	var clean failures
	storeChecks(&clean, parseK8sSources(t, sources), sources)
	if len(clean) > 0 {
		t.Fatalf("the manifests as they are: %v", clean)
	}
	for _, tc := range []struct{ file, old, new, want string }{
		{"gateway.yaml", "@postgres:5432/", "@postgres:5433/", "no Service port"},
		{"gateway.yaml", "uncaged:$pw@", "uncaged:$password@", "password"},
		{"gateway.yaml", "5432/uncaged?", "5432/gateway?", `logs in as "uncaged" to "gateway"`},
		{"gateway.yaml", "value: /run/secrets/uncaged-gateway/database-url", "value: /run/secrets/uncaged-gateway/db-url", "no mounted key of a Secret"},
		{"gateway.yaml", "            - name: UNCAGED_GATEWAY_DATABASE_URL_FILE\n              value: /run/secrets/uncaged-gateway/database-url\n", "", "without UNCAGED_GATEWAY_DATABASE_URL_FILE"},
		{"gateway.yaml", "            - --listen\n", "            - --database-url-file=/x\n            - --listen\n", "kubectl exec's token commands would not see it"},
		{"gateway.yaml", "--from-literal=database-url=", "--from-literal=db-url=", `uses key "database-url" of Secret uncaged-gateway`},
		{"postgres.yaml", "create secret generic uncaged-postgres", "create secret generic uncaged-pg", "does not say how to create it"},
		{"postgres.yaml", "value: /var/lib/postgresql/data/pgdata", "value: /var/lib/pgdata", "not on a volume claim"},
		{"postgres.yaml", "image: postgres:17.6-bookworm", "image: postgres:18.1", "check where this version keeps its data"},
		{"postgres.yaml", "valueFrom:\n                secretKeyRef: {name: uncaged-postgres, key: password}", "value: hunter2", "must come from a Secret"},
		{"postgres.yaml", `"--dbname", "uncaged"]`, `"--dbname", "postgres"]`, "readinessProbe checks --dbname"},
	} {
		if strings.Count(sources[tc.file], tc.old) != 1 {
			t.Errorf("%s does not hold %q exactly once; update this test", tc.file, tc.old)
			continue
		}
		broken := maps.Clone(sources)
		broken[tc.file] = strings.Replace(broken[tc.file], tc.old, tc.new, 1)
		var f failures
		storeChecks(&f, parseK8sSources(t, broken), broken)
		if !slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%s with %q for %q: got %q, want a failure saying %q", tc.file, tc.new, tc.old, f, tc.want)
		}
	}
}

func TestSecretCreation(t *testing.T) {
	t.Parallel()
	src := "# kubectl -n x create secret generic app --from-literal=key=\"$(openssl rand -base64 32)\" \\\n" +
		"#   --from-file=cert=/tmp/c.pem --from-file=/tmp/ca.pem\n" +
		"# kubectl create secret generic app-tls --from-literal=other=1\n"
	keys, ok := secretCreation(src, "app")
	if !ok || keys["key"] != "$(openssl rand -base64 32)" || len(keys) != 3 {
		t.Fatalf("%v %v", keys, ok)
	}
	if _, ok := keys["ca.pem"]; !ok {
		t.Errorf("--from-file without a key: %v", keys)
	}
	if keys, ok := secretCreation(src, "app-tls"); !ok || keys["other"] != "1" || len(keys) != 1 {
		t.Errorf("app-tls: %v %v", keys, ok)
	}
	if _, ok := secretCreation(src, "ap"); ok {
		t.Error("a prefix of a Secret's name matched")
	}
}
