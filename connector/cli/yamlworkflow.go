package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
	// Every problem is reported at once, so one edit can fix them all.
	def, err := yamlwf.Parse(src)
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	// A program that is not there would fail the thread at its role.
	if err := checkPrograms(def, filepath.Dir(abs), a.env.Getenv("PATH")); err != nil {
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
	l, err := a.registryLayout()
	if err != nil {
		return err
	}
	reg, err := registry.Load(l.RegistryFile())
	if err != nil {
		return err
	}
	// Warnings are what may still fail a thread at run time (route keys
	// that cannot be checked, a model not set up yet); they do not stop
	// the add.
	for _, w := range def.Warnings {
		fmt.Fprintf(a.env.Stderr, "warning: %s: %s\n", base, w)
	}
	for _, w := range modelWarnings(def, reg.Config()) {
		fmt.Fprintf(a.env.Stderr, "warning: %s: %s\n", base, w)
	}
	hash := ids.HashBytes(stored)
	return a.registerVersion(l.RegistryFile(), name, base, hash,
		versionFile{l.YAMLWorkflowFile(hash), "YAML workflow", stored},
		versionFile{l.DescriptorFile(hash), "descriptor", descriptor})
}
