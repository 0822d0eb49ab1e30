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

// The instance names one storage root to the gateway, the same across
// restarts of connect: the gateway lets a reconnection from the same
// instance replace its old connection (a network blip) and refuses a
// second machine, or a second root, that uses the same name. Two files in
// the root make it:
//
//   - instance-id, a name for the instance, no secret (gateways of older
//     versions show it);
//   - instance-key, mode 0600, the secret that proves the instance: the
//     gateway keeps and shows only its fingerprint, so an instance cannot
//     be copied from what the gateway shows. A root copied with its key
//     is the same instance (two such roots replace each other at every
//     reconnection, and the gateway's audit log shows it); a root given
//     a copy of another's instance-id alone is another instance.

// instanceFile holds the root's instance id, created once.
func instanceFile(l storage.Layout) string { return filepath.Join(l.Root, "instance-id") }

// instanceKeyFile holds the root's instance key, created once.
func instanceKeyFile(l storage.Layout) string { return filepath.Join(l.Root, "instance-key") }

// instancePattern is what an instance id looks like; the gateway takes
// letters, digits, '-' and '_', up to 64.
var instancePattern = lazyRegexp(`^[a-z0-9]{16,64}$`)

// instanceKeyPattern is what an instance key looks like; the gateway
// takes 32 to 128 letters, digits, '-' and '_'.
var instanceKeyPattern = lazyRegexp(`^[a-z0-9]{32,128}$`)

// instanceEncoding writes ids and keys in lower-case base32, without
// padding.
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
	id, err := rootValue(instanceFile(l), 10, 0o644, func(path, got string) error {
		if !instancePattern().MatchString(got) {
			return fmt.Errorf("%s holds %q, not an instance id: remove the file to make a new one (the gateway will take this root for a new machine)", path, shortened(got))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}

// instanceKey is the root's instance key, made the first time as
// instanceID is, 256 random bits, in a file only its owner may read. A
// file others may read, or that holds something else, is an error that
// changes nothing: the key is what stops another root from passing for
// this one. Never shown, never logged.
func instanceKey(l storage.Layout) (string, error) {
	key, err := rootValue(instanceKeyFile(l), 32, 0o600, func(path, got string) error {
		if !instanceKeyPattern().MatchString(got) {
			// Never what the file holds: it may be most of a key.
			return fmt.Errorf("%s does not hold an instance key: remove the file to make a new one (the gateway will take this root for a new machine)", path)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			return fmt.Errorf("%s may be read by others (mode %04o): it proves this root to the gateway; make it private with chmod 600 %s", path, mode, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("instance key: %w", err)
	}
	return key, nil
}

// rootValue is the value kept in path, made of size random bytes and
// written with perm the first time, atomically and under a lock so two
// processes starting at once agree; check judges a value found.
func rootValue(path string, size int, perm os.FileMode, check func(path, got string) error) (string, error) {
	var value string
	err := atomicfile.Update(path, func() error {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			value = strings.TrimSpace(string(b))
			return check(path, value)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		raw := make([]byte, size)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		value = instanceEncoding.EncodeToString(raw)
		return atomicfile.Write(path, []byte(value+"\n"), perm)
	})
	if err != nil {
		return "", err
	}
	return value, nil
}
