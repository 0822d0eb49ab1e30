package yamlwf

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// Parse and ResolvePaths refuse the bomb with an error naming the limit,
// without ever expanding it.
func TestAliasBombInSchemaDefaultIsRefused(t *testing.T) {
	// Serial: measures the process's allocations.
	data := []byte(testkit.AliasBombWorkflow())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w, err := Load(data, Options{})
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Errorf("refusing a %d KB workflow allocated %d MB", len(data)>>10, n>>20)
	}
	var e *Error
	if w != nil || !errors.As(err, &e) || !strings.Contains(err.Error(), "16 MiB") || !strings.Contains(err.Error(), "aliases") {
		t.Fatalf("Load(bomb) = %v, %v", w, err)
	}
	if _, err := ResolvePaths(data, "/base"); err == nil || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("ResolvePaths(bomb) = %v", err)
	}
}
