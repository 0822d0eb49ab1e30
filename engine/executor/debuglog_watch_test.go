package executor

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Every line appended by any DebugLog of the process is told to each
// watcher, once it is in the file, until the watcher stops; a line that
// could not be written is not told.
func TestDebugLogAppendsAreToldToTheirWatchers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	seen := map[string][]int64{} // watcher → sizes of the file as it was told
	watch := func(name string) func() {
		return WatchAppends(func(path string) {
			if filepath.Dir(path) != dir {
				return // another test's log
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Errorf("told of %s, which is not there: %v", path, err)
				return
			}
			mu.Lock()
			seen[name] = append(seen[name], fi.Size())
			mu.Unlock()
		})
	}
	stopA := watch("a")
	stopB := watch("b")
	log := NewDebugLog(filepath.Join(dir, "x.info.jsonl"), time.Now)
	for range 3 {
		log.Write(TagStep, "a line")
	}
	stopA()
	stopA() // a second stop changes nothing
	log.Write(TagStep, "one more")
	broken := NewDebugLog(filepath.Join(dir, "x.info.jsonl", "under a file"), time.Now)
	broken.Write(TagStep, "never written")
	stopB()
	log.Write(TagStep, "after both stopped")

	mu.Lock()
	defer mu.Unlock()
	if len(seen["a"]) != 3 || len(seen["b"]) != 4 {
		t.Fatalf("told a %d and b %d lines, want 3 and 4", len(seen["a"]), len(seen["b"]))
	}
	for i := 1; i < len(seen["b"]); i++ {
		if seen["b"][i] <= seen["b"][i-1] {
			t.Fatalf("told before the line was in the file: sizes %v", seen["b"])
		}
	}
}
