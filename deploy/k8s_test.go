package deploy

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
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
	sawGateway := false
	for _, d := range deployments {
		where := d.file + " Deployment " + d.name()
		pod := dig(d.doc, "spec", "template", "spec")
		labels := digMap(d.doc, "spec", "template", "metadata", "labels")
		if !subset(digMap(d.doc, "spec", "selector", "matchLabels"), labels) {
			t.Errorf("%s: selector %v does not select its pods %v", where, dig(d.doc, "spec", "selector"), labels)
		}
		if dig(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: pods may run as root", where)
		}
		for _, c := range digList(pod, "containers") {
			cwhere := where + " container " + digString(c, "name")
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				p := dig(c, probe, "httpGet")
				if p == nil {
					t.Errorf("%s: no HTTP %s", cwhere, probe)
					continue
				}
				if _, ok := containerPort(pod, dig(p, "port")); !ok {
					t.Errorf("%s: %s port %v is no container port", cwhere, probe, dig(p, "port"))
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
			for _, e := range digList(c, "env") {
				if ref := dig(e, "valueFrom", "secretKeyRef"); ref != nil {
					secret := digString(ref, "name")
					src, _ := os.ReadFile(filepath.Join("k8s", d.file))
					if !strings.Contains(string(src), "create secret generic "+secret) {
						t.Errorf("%s: uses Secret %s but %s does not say how to create it", cwhere, secret, d.file)
					}
				}
			}
		}
	}
	if !sawGateway {
		t.Fatal("no Deployment runs uncaged-gateway")
	}

	services := byKind["Service"]
	for _, s := range services {
		where := s.file + " Service " + s.name()
		var target *object
		for i, d := range deployments {
			if subset(digMap(s.doc, "spec", "selector"), digMap(d.doc, "spec", "template", "metadata", "labels")) {
				target = &deployments[i]
			}
		}
		if target == nil {
			t.Errorf("%s: selector %v matches no Deployment's pods", where, dig(s.doc, "spec", "selector"))
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
		for _, d := range deployments {
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
