package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHasBundleFindsYAMLWorkflows(t *testing.T) {
	t.Parallel()
	l := Layout{Root: t.TempDir()}
	if got := l.YAMLWorkflowFile("SSVQ0RZ55P9Y4"); got != filepath.Join(l.Root, "bundles", "SSVQ0RZ55P9Y4.workflow.yaml") {
		t.Fatalf("YAMLWorkflowFile = %s", got)
	}
	if l.YAMLWorkflowFile("SSVQ0RZ55P9Y4") == l.DescriptorFile("SSVQ0RZ55P9Y4") {
		t.Fatal("a YAML workflow would overwrite its own descriptor")
	}
	if err := os.MkdirAll(l.BundlesDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	// A descriptor alone is not a workflow.
	if err := os.WriteFile(l.DescriptorFile("SSVQ0RZ55P9Y4"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l.HasBundle("SSVQ0RZ55P9Y4") {
		t.Fatal("a descriptor without a workflow counts as one")
	}
	if err := os.WriteFile(l.YAMLWorkflowFile("SSVQ0RZ55P9Y4"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !l.HasBundle("SSVQ0RZ55P9Y4") || !l.HasBundle("ssvq0rz55p9y4") {
		t.Fatal("stored YAML workflow not found")
	}
}
