//go:build !unix

package store

// lockDataDir does nothing where flock is missing: there, one process per
// data directory is the operator's to ensure.
func lockDataDir(string) (func(), error) { return func() {}, nil }
