package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// errNoTSC is what build --check says when there is no compiler to run.
var errNoTSC = errors.New("build --check: tsc not found in node_modules/.bin or on PATH; install it with: npm install --save-dev typescript")

// findTSC returns the TypeScript compiler a workspace would use: its own
// node_modules/.bin/tsc, else the first tsc on PATH (the caller's PATH, as
// the command's environment gives it).
func findTSC(dir, pathList string) (string, bool) {
	candidates := []string{filepath.Join(dir, "node_modules", ".bin", "tsc")}
	for _, d := range filepath.SplitList(pathList) {
		if d != "" {
			candidates = append(candidates, filepath.Join(d, "tsc"))
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return c, true
		}
	}
	return "", false
}

// tscArgs type-checks the workspace's project when it has a tsconfig.json
// (its paths map @uncaged/workflow-runtime to the workspace's types), else
// the entries alone with the settings build bundles for.
func tscArgs(plan buildPlan) []string {
	if _, err := os.Stat(filepath.Join(plan.dir, "tsconfig.json")); err == nil {
		return []string{"--noEmit", "-p", "tsconfig.json"}
	}
	args := []string{"--noEmit", "--strict", "--skipLibCheck", "--target", "ES2020", "--module", "ESNext", "--moduleResolution", "Bundler"}
	return append(args, plan.entries...)
}

// typeCheck runs tsc --noEmit in the workspace; its diagnostics go to
// stderr, and a failure stops the build before anything is written.
func (a *app) typeCheck(ctx context.Context, plan buildPlan) error {
	tsc, ok := findTSC(plan.dir, a.env.Getenv("PATH"))
	if !ok {
		return errNoTSC
	}
	started := time.Now()
	args := tscArgs(plan)
	cmd := exec.CommandContext(ctx, tsc, args...)
	cmd.Dir = plan.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if text := strings.TrimRight(out.String(), "\n"); text != "" && err != nil {
		fmt.Fprintln(a.env.Stderr, text)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		fmt.Fprintf(a.env.Stderr, "build: type check failed (%s exited %d); nothing was built\n", displayPath(plan.dir, tsc), ee.ExitCode())
		return exitError{1}
	case err != nil:
		return fmt.Errorf("build --check: running %s: %w", tsc, err)
	}
	fmt.Fprintf(a.out(), "build: types checked by %s (%d ms)\n", displayPath(plan.dir, tsc), time.Since(started).Milliseconds())
	return nil
}
