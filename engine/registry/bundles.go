package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/uncaged/workflow/engine/atomicfile"
)

// StoreFile writes a hash-named bundle file (bundle, descriptor or types)
// unless it is already there with the same bytes. label names the file in
// the error when a different file already holds that name.
func StoreFile(path, label string, data []byte) error {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		return nil
	case err == nil:
		return fmt.Errorf("%s for this hash already exists with different contents; refusing to overwrite", label)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
