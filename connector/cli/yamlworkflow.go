package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/yamlwf"
)

func isYAMLWorkflowFile(base string) bool {
	return strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")
}

// addYAMLWorkflow registers a YAML workflow: validated, its relative agent
// paths made absolute, stored as bundles/<hash>.workflow.yaml beside the
// usual descriptor sidecar. Every check runs before anything is written.
func (a *app) addYAMLWorkflow(name, abs string) error {
	base := filepath.Base(abs)
	src, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	// Errors name the file: the YAML errors' line numbers refer to it.
	if _, err := yamlwf.Parse(src); err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	stored, err := yamlwf.ResolvePaths(src, filepath.Dir(abs))
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	wf, err := yamlwf.Load(stored, yamlwf.Options{})
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	descriptor, err := wf.Descriptor().MarshalYAML()
	if err != nil {
		return err
	}
	l, err := a.layout()
	if err != nil {
		return err
	}
	// Check the registry is readable before anything is stored for it.
	if _, err := registry.Load(l.RegistryFile()); err != nil {
		return err
	}
	hash := ids.HashBytes(stored)
	if err := registry.StoreFile(l.YAMLWorkflowFile(hash), "YAML workflow", stored); err != nil {
		return err
	}
	if err := registry.StoreFile(l.DescriptorFile(hash), "descriptor", descriptor); err != nil {
		return err
	}
	err = registry.Update(l.RegistryFile(), func(r *registry.Registry) error {
		r.Register(name, hash, time.Now().UnixMilli())
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out(), "registered workflow %q from %s as %s\n", name, base, hash)
	return nil
}
