package threads

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestConcurrentProcessesLoseNoThreads starts several copies of this test
// binary that all add threads to one threads.json at the same time.
func TestConcurrentProcessesLoseNoThreads(t *testing.T) {
	t.Parallel()
	const procs, perProc = 8, 40
	dir := t.TempDir()
	cmds := make([]*exec.Cmd, procs)
	for p := range cmds {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "THREADS_HELPER_DIR="+dir, "THREADS_HELPER_PROC="+strconv.Itoa(p), "THREADS_HELPER_N="+strconv.Itoa(perProc))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p] = cmd
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper failed: %v", err)
		}
	}
	idx, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != procs*perProc {
		t.Fatalf("threads.json has %d entries, want %d: updates were lost", len(idx), procs*perProc)
	}
	hist, _ := ReadHistory(dir)
	if len(hist) != procs*perProc {
		t.Fatalf("history has %d lines, want %d", len(hist), procs*perProc)
	}
}

// TestMain makes this test binary one of the writers of
// TestConcurrentProcessesLoseNoThreads or TestGroupedWritersLoseNoUpdate
// when it is started as one (THREADS_HELPER_DIR set), instead of a
// test run: a helper that is a test would show up as skipped in every
// normal run.
func TestMain(m *testing.M) {
	if dir := os.Getenv("THREADS_HELPER_DIR"); dir != "" {
		helper := upsertAsHelper
		if os.Getenv("THREADS_HELPER_MODE") == "script" {
			helper = runScriptAsHelper
		}
		if err := helper(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// upsertAsHelper is one writer process's work: its threads, each into the
// index and the history.
func upsertAsHelper(dir string) error {
	p, _ := strconv.Atoi(os.Getenv("THREADS_HELPER_PROC"))
	n, _ := strconv.Atoi(os.Getenv("THREADS_HELPER_N"))
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("P%02dT%04d", p, i)
		if err := Upsert(dir, id, Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: int64(i)}); err != nil {
			return err
		}
		if err := AppendHistory(dir, HistoryEntry{ThreadID: id, Head: fake("E"), Start: fake("S"), CompletedAt: int64(i)}); err != nil {
			return err
		}
	}
	return nil
}
