package yamlwf

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/testkit"
)

// bombWorkflow is a valid workflow but for the alias bomb in a role's
// schema default: 32 KB that expand to about a gigabyte, few enough values
// to pass the 4M-value cap. It used to take `workflow add` past 3 GB.
func bombWorkflow() []byte {
	return []byte(`version: 1
description: An alias bomb in a schema default.
agents:
  w: {type: exec, command: /bin/true}
roles:
  writer:
    description: Writes.
    prompt: Write.
    agent: w
    output:
      type: object
      properties:
        x:
          type: object
          default:
` + testkit.AliasBomb("            ", 6) + `graph:
  __start__: writer
  writer: __end__
`)
}

// Parse and ResolvePaths refuse the bomb with an error naming the limit,
// without ever expanding it.
func TestAliasBombInSchemaDefaultIsRefused(t *testing.T) {
	data := bombWorkflow()
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
