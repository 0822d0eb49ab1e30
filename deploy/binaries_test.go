package deploy

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// The two binaries, built by the tests exactly as their Dockerfiles build
// them, then asked (--help) which commands and flags exist.
const (
	gatewayBinary  = "uncaged-gateway"
	workflowBinary = "uncaged-workflow"
)

// dockerfileOf names the Dockerfile that builds each binary.
var dockerfileOf = map[string]string{
	gatewayBinary:  "docker/gateway.Dockerfile",
	workflowBinary: "docker/workflow.Dockerfile",
}

var (
	binDir   string
	builds   = map[string]*buildResult{}
	buildsMu sync.Mutex
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// pgtest stops its PostgreSQL server, if a test started one, after
	// the tests.
	code := pgtest.Main(m)
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// buildVersion is stamped into the test builds, to prove -ldflags works.
const buildVersion = "deploy-test"

// binary builds name once per test run with the go build line of its
// Dockerfile: the same environment (CGO_ENABLED=0), the same flags
// (-trimpath, -ldflags), the same package.
func binary(t *testing.T, name string) string {
	t.Helper()
	buildsMu.Lock()
	b := builds[name]
	if b == nil {
		b = &buildResult{}
		builds[name] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.path, b.err = buildLikeDockerfile(name) })
	if b.err != nil {
		t.Fatalf("build %s as %s does: %v", name, dockerfileOf[name], b.err)
	}
	return b.path
}

func buildLikeDockerfile(name string) (string, error) {
	src, err := os.ReadFile(dockerfileOf[name])
	if err != nil {
		return "", err
	}
	ins, err := parseDockerfile(string(src))
	if err != nil {
		return "", err
	}
	env, args, err := goBuild(ins)
	if err != nil {
		return "", err
	}
	out := filepath.Join(binDir, name)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "${VERSION}", buildVersion)
		if args[i] == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// goBuild finds the RUN that builds the binary and returns its variable
// assignments and the arguments of `go`.
func goBuild(ins []instruction) (env, args []string, err error) {
	for _, i := range ins {
		if i.Cmd != "RUN" || !strings.Contains(i.Args, "go build") {
			continue
		}
		words, err := shellWords(i.Args)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", i.Line, err)
		}
		for n, w := range words {
			if w == "go" {
				return env, words[n+1:], nil
			}
			if !strings.Contains(w, "=") {
				return nil, nil, fmt.Errorf("line %d: %q before go build is not an assignment", i.Line, w)
			}
			env = append(env, w)
		}
	}
	return nil, nil, fmt.Errorf("no RUN ... go build")
}

// isStatic says whether an ELF binary needs no dynamic loader or library.
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }() // opened read-only
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return false, nil
		}
	}
	libs, _ := f.ImportedLibraries()
	return len(libs) == 0, nil
}

var (
	helpMu    sync.Mutex
	helpCache = map[string]string{}
	flagInUse = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`)
)

// help is the output of `<bin> <path...> --help`.
func help(bin string, path ...string) (string, error) {
	key := bin + "\x00" + strings.Join(path, "\x00")
	helpMu.Lock()
	defer helpMu.Unlock()
	if h, ok := helpCache[key]; ok {
		return h, nil
	}
	out, err := exec.Command(bin, append(append([]string{}, path...), "--help")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s --help: %v\n%s", filepath.Base(bin), strings.Join(path, " "), err, out)
	}
	helpCache[key] = string(out)
	return string(out), nil
}

// reporter is the part of *testing.T checkArgs needs, so its own test can
// watch it fail.
type reporter interface {
	Errorf(format string, args ...any)
}

// checkArgs reports unless args (a command line without the binary) name a
// real subcommand of bin and use only flags it has. The subcommand is the
// longest run of leading words whose help calls itself by that name; the
// words after it are positional arguments.
func checkArgs(r reporter, where, bin string, args []string) {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	var path []string
	var h string
	for n := 1; n <= len(words); n++ {
		out, err := help(bin, words[:n]...)
		if err != nil || !strings.Contains(out, filepath.Base(bin)+" "+strings.Join(words[:n], " ")) {
			break
		}
		path, h = words[:n], out
	}
	if len(path) == 0 {
		r.Errorf("%s: %s has no command %q", where, filepath.Base(bin), strings.Join(words, " "))
		return
	}
	flags := map[string]bool{}
	for _, m := range flagInUse.FindAllStringSubmatch(h, -1) {
		flags[m[1]] = true
	}
	for _, a := range args[len(path):] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !flags[name] {
			r.Errorf("%s: %s %s has no flag --%s", where, filepath.Base(bin), strings.Join(path, " "), name)
		}
	}
}

// goSources is the text of every non-test Go file under dir, to check that
// an environment variable a deployment sets is one the code reads.
func goSources(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(src)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// readsEnv says whether the sources read the variable name: as a string
// literal, or as the "UNCAGED_GATEWAY_" prefix plus the upper-cased flag
// name that serve derives its variables from.
func readsEnv(src, name string) bool {
	if strings.Contains(src, `"`+name+`"`) {
		return true
	}
	if rest, ok := strings.CutPrefix(name, "UNCAGED_GATEWAY_"); ok && strings.Contains(src, `"UNCAGED_GATEWAY_" + strings.ToUpper(`) {
		flag := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		return strings.Contains(src, `"`+flag+`"`)
	}
	return false
}

func TestBinariesAreStaticAndStamped(t *testing.T) {
	t.Parallel()
	for _, name := range []string{gatewayBinary, workflowBinary} {
		bin := binary(t, name)
		static, err := isStatic(bin)
		if err != nil || !static {
			t.Errorf("%s is not a static binary (%v)", name, err)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), buildVersion) {
			t.Errorf("%s version: %v %s (want %q from -ldflags)", name, err, out, buildVersion)
		}
	}
	if _, err := isStatic("doc.go"); err == nil {
		t.Error("a Go source file read as an ELF binary")
	}
}

// failures collects what checkArgs reports.
type failures []string

func (f *failures) Errorf(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

func TestCheckArgsCatchesMistakes(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		gatewayBinary:  {"serve", "--listen", ":8080", "--heartbeat=15s"},
		workflowBinary: {"connect", "--name", "x", "--gateway", "https://gw", "--token-file", "/t"},
	} {
		var f failures
		checkArgs(&f, "good", binary(t, name), args)
		if len(f) > 0 {
			t.Errorf("good arguments refused: %v", f)
		}
	}
	for _, bad := range [][]string{
		{"serve", "--listne", ":8080"},
		{"serv", "--listen", ":8080"},
		{"--listen", ":8080"},
		{"token", "create", "--bogus"},
	} {
		var f failures
		checkArgs(&f, "bad", binary(t, gatewayBinary), bad)
		if len(f) == 0 {
			t.Errorf("%q passed", bad)
		}
	}
	// The connector's root accepts any word (it prints its usage), so an
	// unknown command must be caught by the usage line.
	var f failures
	checkArgs(&f, "bad", binary(t, workflowBinary), []string{"conect", "--name", "x"})
	if len(f) == 0 {
		t.Error("a misspelt connector command passed")
	}
}
