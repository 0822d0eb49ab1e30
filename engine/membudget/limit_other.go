//go:build !linux

package membudget

// ProcessLimit is how much memory Go's heap may take in this process as far
// as the operating system says; outside Linux it is not read (0).
func ProcessLimit() (int64, string) { return 0, "" }

// osRoom reports nothing outside Linux: only Go's memory limit is known.
func osRoom(int64, func(room, limit int64, source string)) {}
