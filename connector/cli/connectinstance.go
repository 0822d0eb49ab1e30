package cli

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/storage"
)

// The instance id names one storage root to the gateway, the same across
// restarts of connect: the gateway lets a reconnection from the same
// instance replace its old connection (a network blip) and refuses a
// second machine, or a second root, that uses the same name.

// instanceFile holds the root's instance id, created once.
func instanceFile(l storage.Layout) string { return filepath.Join(l.Root, "instance-id") }

// instancePattern is what an instance id looks like; the gateway takes
// letters, digits, '-' and '_', up to 64.
var instancePattern = lazyRegexp(`^[a-z0-9]{16,64}$`)

// instanceEncoding writes ids in lower-case base32, without padding.
var instanceEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// shortened is at most 40 bytes of what a damaged file holds, for a message.
func shortened(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// instanceID is the root's instance id, made and written (atomically,
// under a lock, so two processes starting at once agree) the first time.
// A file that holds something else is an error, not a new identity: the
// gateway would take this root for another machine.
func instanceID(l storage.Layout) (string, error) {
	path := instanceFile(l)
	var id string
	err := atomicfile.Update(path, func() error {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			id = strings.TrimSpace(string(b))
			if !instancePattern().MatchString(id) {
				return fmt.Errorf("%s holds %q, not an instance id: remove the file to make a new one (the gateway will take this root for a new machine)", path, shortened(id))
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		raw := make([]byte, 10)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		id = instanceEncoding.EncodeToString(raw)
		return atomicfile.Write(path, []byte(id+"\n"), 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}
