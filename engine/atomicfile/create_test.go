package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestCreateNewPutsAFileOnceAndLeavesWhatIsThere: the first put writes
// the file whole with the mode asked for (whatever the umask), in a
// directory it makes if needed, with nothing else left beside it; a put
// of a path already there changes nothing and says so. Of writers racing
// for one path, one creates it.
func TestCreateNewPutsAFileOnceAndLeavesWhatIsThere(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "sub")
	p := filepath.Join(dir, "BLOB.txt")
	created, err := CreateNew(p, []byte("first"), 0o644)
	if err != nil || !created {
		t.Fatalf("CreateNew = %v, %v", created, err)
	}
	created, err = CreateNew(p, []byte("second"), 0o644)
	if runtime.GOOS != "linux" {
		return // the fallback replaces what is there
	}
	if err != nil || created {
		t.Fatalf("CreateNew over an existing file = %v, %v; want false", created, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Errorf("contents %q, want the first put's", b)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 whatever the umask", st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the file alone", len(entries))
	}

	race := filepath.Join(dir, "RACE.txt")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			created, err := CreateNew(race, []byte("same bytes"), 0o644)
			if err != nil {
				t.Error(err)
			}
			if created {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	// Elsewhere than Linux every writer renames its copy into place.
	if runtime.GOOS == "linux" && wins.Load() != 1 {
		t.Errorf("%d of 16 racing writers created the file, want 1", wins.Load())
	}
	if b, _ := os.ReadFile(race); string(b) != "same bytes" {
		t.Errorf("raced file holds %q", b)
	}
}
