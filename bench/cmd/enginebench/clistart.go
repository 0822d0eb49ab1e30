package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// helloSource is the baseline of the CLI start figures: the smallest Go
// program that prints, so that what is left over is ours (the size of the
// binary and the package initialisation it links in).
const helloSource = `package main

import "fmt"

func main() { fmt.Println("hello, world") }
`

// buildHello builds the hello-world baseline in its own module, with the
// settings the shipped binaries are built with.
func buildHello(work string) string {
	dir := filepath.Join(work, "hello")
	check(os.MkdirAll(dir, 0o755))
	check(os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644))
	check(os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloSource), 0o644))
	bin := filepath.Join(work, "hello-world")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(shippedEnv(), "GOWORK=off")
	cmd.Stderr = os.Stderr
	check(cmd.Run())
	return bin
}

// buildCLI builds uncaged-workflow the way `make build` does (static, cgo
// off, -trimpath): start-up depends on how the binary is linked.
func buildCLI(work string) string {
	bin := filepath.Join(work, "uncaged-workflow")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, "./connector/cmd/uncaged-workflow")
	cmd.Env = shippedEnv()
	cmd.Stderr = os.Stderr
	check(cmd.Run())
	return bin
}

func shippedEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
}

// cliStart times the start of `version` and `workflow list` (a root with
// one workflow) against hello-world, interleaved round by round so that
// load from elsewhere on the machine falls on all three alike, and lists
// the package initialisers that cost the most.
func cliStart(work string, rounds int) {
	fmt.Println("CLI start (real binaries, interleaved rounds, medians)")
	hello := buildHello(work)
	bin := buildCLI(work)
	root := filepath.Join(work, "cli-root")
	wf := filepath.Join(work, "cli-steps.esm.js")
	check(os.WriteFile(wf, []byte(bundleSource(3)), 0o644))
	env := append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+root)
	// run returns the wall time and the CPU time (user and system) of one
	// start; on a busy machine the CPU time is the steadier of the two.
	run := func(name string, args ...string) (time.Duration, time.Duration) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			check(fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out))
		}
		return d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	run(bin, "workflow", "add", "steps", wf)

	cases := []struct {
		label string
		name  string
		args  []string
	}{
		{"hello-world (baseline)", hello, nil},
		{"uncaged-workflow version", bin, []string{"version"}},
		{"uncaged-workflow workflow list", bin, []string{"workflow", "list"}},
	}
	walls := make([][]time.Duration, len(cases))
	cpus := make([][]time.Duration, len(cases))
	for r := 0; r < rounds; r++ {
		for i, c := range cases {
			wall, cpu := run(c.name, c.args...)
			walls[i] = append(walls[i], wall)
			cpus[i] = append(cpus[i], cpu)
		}
	}
	wall0, cpu0 := medianOf(walls[0]), medianOf(cpus[0])
	fmt.Printf("  %-32s %10s %14s\n", "", "wall", "CPU")
	for i, c := range cases {
		wall, cpu := medianOf(walls[i]), medianOf(cpus[i])
		fmt.Printf("  %-32s %10s (%.1fx) %10s (%.1fx) of hello-world\n", c.label,
			wall.Round(time.Microsecond), wall.Seconds()/wall0.Seconds(), cpu.Round(time.Microsecond), cpu.Seconds()/cpu0.Seconds())
	}
	initTrace(bin, env, rounds)
	fmt.Println()
}

// initTrace runs `version` with GODEBUG=inittrace=1 and prints the total
// time package initialisers took and the costliest of them (medians over
// the runs), which is where start-up goes beyond hello-world's.
func initTrace(bin string, env []string, runs int) {
	perPkg := map[string][]float64{}
	allocs := map[string]int{}
	var totals []float64
	for r := 0; r < runs; r++ {
		cmd := exec.Command(bin, "version")
		cmd.Env = append(env, "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		check(cmd.Run())
		total := 0.0
		sc := bufio.NewScanner(&stderr)
		for sc.Scan() {
			// init github.com/x/y @1.2 ms, 0.31 ms clock, 1234 bytes, 5 allocs
			f := strings.Fields(sc.Text())
			if len(f) < 8 || f[0] != "init" {
				continue
			}
			ms, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				continue
			}
			b, _ := strconv.Atoi(f[7])
			perPkg[f[1]] = append(perPkg[f[1]], ms)
			allocs[f[1]] = b
			total += ms
		}
		totals = append(totals, total)
	}
	type pkg struct {
		name string
		ms   float64
	}
	var pkgs []pkg
	for name, ms := range perPkg {
		pkgs = append(pkgs, pkg{name, medianFloat(ms)})
	}
	sort.Slice(pkgs, func(a, b int) bool { return pkgs[a].ms > pkgs[b].ms })
	fmt.Printf("  package initialisers (GODEBUG=inittrace=1, `version`): %.2f ms in %d packages; costliest:\n", medianFloat(totals), len(pkgs))
	for _, p := range pkgs[:min(8, len(pkgs))] {
		fmt.Printf("    %6.2f ms %9d B  %s\n", p.ms, allocs[p.name], p.name)
	}
}

func medianOf(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[len(s)/2]
}

func medianFloat(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
