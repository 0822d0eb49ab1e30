package deploy

import (
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// stage is one FROM ... section of a Dockerfile.
type stage struct {
	image, name string
	ins         []instruction
}

// stages splits a Dockerfile at its FROMs, resolving ${ARG} in image names
// from the ARG defaults declared before the first FROM.
func stages(t *testing.T, ins []instruction) []stage {
	t.Helper()
	args := map[string]string{}
	var out []stage
	for _, i := range ins {
		switch {
		case i.Cmd == "ARG" && len(out) == 0:
			k, v, _ := strings.Cut(i.Args, "=")
			args[k] = v
		case i.Cmd == "FROM":
			words := strings.Fields(i.Args)
			image := os.Expand(words[0], func(k string) string { return args[k] })
			s := stage{image: image}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				s.name = words[2]
			}
			out = append(out, s)
		case len(out) > 0:
			out[len(out)-1].ins = append(out[len(out)-1].ins, i)
		}
	}
	return out
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, i := range s.ins {
		if i.Cmd == cmd {
			out = append(out, i)
		}
	}
	return out
}

func (s stage) last(cmd string) (instruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return instruction{}, false
	}
	return all[len(all)-1], true
}

// pinnedImage: a registry path with an explicit tag that is not "latest".
var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+:[A-Za-z0-9][A-Za-z0-9._-]*$`)

func TestDockerfiles(t *testing.T) {
	t.Parallel()
	for name, file := range dockerfileOf {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ins, err := parseDockerfile(string(src))
			if err != nil {
				t.Fatal(err)
			}
			st := stages(t, ins)
			if len(st) != 2 {
				t.Fatalf("want a build stage and a runtime stage, got %d stages", len(st))
			}
			for _, s := range st {
				if !pinnedImage.MatchString(s.image) || strings.HasSuffix(s.image, ":latest") {
					t.Errorf("base image %q is not pinned to a tag", s.image)
				}
			}
			build, final := st[0], st[1]
			if !strings.HasPrefix(build.image, "golang:") {
				t.Errorf("build stage on %q, want golang", build.image)
			}

			env, args, err := goBuild(build.ins)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(env, "CGO_ENABLED=0") {
				t.Errorf("go build without CGO_ENABLED=0 (env %q)", env)
			}
			if !slices.Contains(args, "-trimpath") {
				t.Errorf("go build without -trimpath: %q", args)
			}
			out := args[slices.Index(args, "-o")+1]
			if path.Base(out) != name {
				t.Errorf("go build -o %s, want a file named %s", out, name)
			}
			pkg := args[len(args)-1]
			if _, err := os.Stat("../" + pkg + "/main.go"); err != nil {
				t.Errorf("built package %s: %v", pkg, err)
			}

			// The runtime stage copies exactly that file and runs it.
			dest := ""
			for _, c := range final.all("COPY") {
				w := strings.Fields(c.Args)
				if len(w) == 3 && w[0] == "--from="+build.name && w[1] == out {
					dest = w[2]
				}
			}
			if dest == "" {
				t.Fatalf("the runtime stage does not COPY --from=%s %s", build.name, out)
			}
			user, ok := final.last("USER")
			if !ok {
				t.Fatal("no USER: the image would run as root")
			}
			uid, _, _ := strings.Cut(user.Args, ":")
			if uid == "0" || uid == "root" || strings.Trim(uid, "0123456789") != "" {
				t.Errorf("USER %s: want a numeric non-root uid (Kubernetes runAsNonRoot checks numbers)", user.Args)
			}

			bin := binary(t, name)
			ep, ok := final.last("ENTRYPOINT")
			if !ok {
				t.Fatal("no ENTRYPOINT")
			}
			entry, err := execForm(ep.Args)
			if err != nil {
				t.Fatal(err)
			}
			if entry[len(entry)-1] != dest {
				t.Errorf("ENTRYPOINT %q does not end in the binary %s", entry, dest)
			}
			cmd, ok := final.last("CMD")
			if !ok {
				t.Fatal("no CMD")
			}
			cmdArgs, err := execForm(cmd.Args)
			if err != nil {
				t.Fatal(err)
			}
			checkArgs(t, file+" CMD", bin, cmdArgs)

			// Every variable the image sets is one the binary reads.
			imageEnv := map[string]string{}
			for _, e := range final.all("ENV") {
				k, v, _ := strings.Cut(e.Args, "=")
				imageEnv[k] = v
				if !readsEnv(sourcesOf(t, name), k) {
					t.Errorf("ENV %s, which %s never reads", k, name)
				}
			}

			if name != gatewayBinary {
				return
			}
			checkDataDir(t, build, final, imageEnv["UNCAGED_GATEWAY_DATA_DIR"], user.Args)
			hc, ok := final.last("HEALTHCHECK")
			if !ok {
				t.Fatal("the gateway image has no HEALTHCHECK")
			}
			_, form, ok := strings.Cut(hc.Args, "CMD ")
			if !ok {
				t.Fatalf("HEALTHCHECK %s has no CMD", hc.Args)
			}
			check, err := execForm(form)
			if err != nil {
				t.Fatal(err)
			}
			if check[0] != dest {
				t.Errorf("HEALTHCHECK runs %s, not the binary %s (the image has no shell)", check[0], dest)
			}
			checkArgs(t, file+" HEALTHCHECK", bin, check[1:])
			// The port the image exposes is the one serve listens on.
			expose, _ := final.last("EXPOSE")
			var listen string
			for _, e := range final.all("ENV") {
				if v, ok := strings.CutPrefix(e.Args, "UNCAGED_GATEWAY_LISTEN="); ok {
					listen = v
				}
			}
			if listen == "" || !strings.HasSuffix(listen, ":"+expose.Args) {
				t.Errorf("EXPOSE %s but UNCAGED_GATEWAY_LISTEN=%q", expose.Args, listen)
			}
		})
	}
}

// sourcesOf is the Go source of what a binary is built from (see
// goSources).
func sourcesOf(t *testing.T, name string) string {
	t.Helper()
	if name == gatewayBinary {
		return goSources(t, "../gateway")
	}
	return goSources(t, "../connector") + goSources(t, "../engine")
}

// checkDataDir reports unless dir, the image's data directory, is a
// directory the build stage makes (install -d) owned by user (uid:gid) and
// the runtime stage copies in with that owner: the runtime image has no
// shell to make it, the gateway must write there, and a named volume
// mounted on it starts with its owner and mode.
func checkDataDir(r reporter, build, final stage, dir, user string) {
	if dir == "" {
		r.Errorf("the image sets no UNCAGED_GATEWAY_DATA_DIR: the store would go to the user's home, which nothing mounts")
		return
	}
	uid, gid, _ := strings.Cut(user, ":")
	src := ""
	for _, c := range final.all("COPY") {
		w := strings.Fields(c.Args)
		if len(w) == 4 && w[0] == "--from="+build.name && w[1] == "--chown="+user && w[3] == dir {
			src = w[2]
		}
	}
	if src == "" {
		r.Errorf("the runtime stage does not COPY --from=%s --chown=%s <dir> %s", build.name, user, dir)
		return
	}
	for _, run := range build.all("RUN") {
		words, err := shellWords(run.Args)
		if err != nil {
			continue
		}
		for _, cmd := range commands(words) {
			if cmd[0] == "install" && slices.Contains(cmd, "-d") && cmd[len(cmd)-1] == src &&
				slices.Contains(cmd, "-o") && cmd[slices.Index(cmd, "-o")+1] == uid &&
				slices.Contains(cmd, "-g") && cmd[slices.Index(cmd, "-g")+1] == gid {
				return
			}
		}
	}
	r.Errorf("the build stage does not make %s with install -d -o %s -g %s", src, uid, gid)
}

func TestCheckDataDirCatchesMistakes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(dockerfileOf[gatewayBinary])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"", "", ""},
		{"install -d -o 65532", "install -d -o 0", "does not make /out/data"},
		{"RUN install -d -o 65532 -g 65532 /out/data", "RUN mkdir -p /out/data", "does not make /out/data"},
		{"--chown=65532:65532 /out/data", "/out/data", "does not COPY"},
		{"ENV UNCAGED_GATEWAY_DATA_DIR=/var/lib/uncaged-gateway", "ENV UNCAGED_GATEWAY_DATA_DIR=/data", "does not COPY"},
		{"ENV UNCAGED_GATEWAY_DATA_DIR=/var/lib/uncaged-gateway", "", "sets no UNCAGED_GATEWAY_DATA_DIR"},
	} {
		if !strings.Contains(string(src), tc.old) {
			t.Errorf("%s lacks %q; update this test", dockerfileOf[gatewayBinary], tc.old)
			continue
		}
		ins, err := parseDockerfile(strings.Replace(string(src), tc.old, tc.new, 1))
		if err != nil {
			t.Fatal(err)
		}
		st := stages(t, ins)
		env, user := map[string]string{}, ""
		for _, e := range st[1].all("ENV") {
			k, v, _ := strings.Cut(e.Args, "=")
			env[k] = v
		}
		if u, ok := st[1].last("USER"); ok {
			user = u.Args
		}
		var f failures
		checkDataDir(&f, st[0], st[1], env["UNCAGED_GATEWAY_DATA_DIR"], user)
		switch {
		case tc.want == "" && len(f) > 0:
			t.Errorf("the Dockerfile as it is: %v", f)
		case tc.want != "" && !slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, tc.want) }):
			t.Errorf("%q for %q: got %q, want a failure saying %q", tc.new, tc.old, f, tc.want)
		}
	}
}

func TestDockerignoreKeepsTheContextSmall(t *testing.T) {
	t.Parallel()
	for _, file := range dockerfileOf {
		b, err := os.ReadFile(file + ".dockerignore")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{".git", "**/node_modules"} {
			if !slices.Contains(strings.Split(string(b), "\n"), want) {
				t.Errorf("%s.dockerignore lacks %s", file, want)
			}
		}
	}
}

// TestGatewayHealthcheckRuns runs the gateway image's HEALTHCHECK command
// against a real gateway started as the image starts it (ENTRYPOINT + CMD,
// the image's UNCAGED_GATEWAY_LISTEN moved to a free loopback port): healthy
// while it serves, unhealthy once it is gone.
func TestGatewayHealthcheckRuns(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(dockerfileOf[gatewayBinary])
	if err != nil {
		t.Fatal(err)
	}
	ins, err := parseDockerfile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	final := stages(t, ins)[1]
	hc, _ := final.last("HEALTHCHECK")
	_, form, _ := strings.Cut(hc.Args, "CMD ")
	check, err := execForm(form)
	if err != nil {
		t.Fatal(err)
	}
	cmdIns, _ := final.last("CMD")
	serveArgs, err := execForm(cmdIns.Args)
	if err != nil {
		t.Fatal(err)
	}
	bin := binary(t, gatewayBinary)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	// The image's variables, with its listen address and data directory
	// moved somewhere this test may use.
	dataDir := t.TempDir()
	env := os.Environ()
	for _, e := range final.all("ENV") {
		env = append(env, e.Args)
	}
	env = append(env, "UNCAGED_GATEWAY_LISTEN="+addr, "UNCAGED_GATEWAY_DATA_DIR="+dataDir,
		"UNCAGED_GATEWAY_KEY="+strings.Repeat("k", 32), "UNCAGED_GATEWAY_URL=")
	gw := exec.Command(bin, serveArgs...)
	gw.Env = env
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
				t.Error(err)
			}
			if err := gw.Wait(); err != nil {
				t.Errorf("gateway: %v", err)
			}
		}
	}
	defer stop()
	healthcheck := func() error {
		c := exec.Command(bin, check[1:]...)
		c.Env = env
		return c.Run()
	}
	testkit.WaitUntil(t, "the healthcheck to pass", func() bool { return healthcheck() == nil })
	// Serving means the store is open: in the image's data directory.
	if _, err := os.Stat(filepath.Join(dataDir, "gateway.db")); err != nil {
		t.Errorf("the gateway keeps no store in UNCAGED_GATEWAY_DATA_DIR: %v", err)
	}
	stop()
	if err := healthcheck(); err == nil {
		t.Fatal("the healthcheck passes with the gateway gone")
	}
}
