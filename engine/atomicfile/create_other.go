//go:build !linux

package atomicfile

import "os"

// createUnnamed has no unnamed files to make outside Linux.
func createUnnamed(string, []byte, os.FileMode) (bool, error) { return false, errNoUnnamed }
