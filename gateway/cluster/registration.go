package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/presence"
)

// ShareRegistration tells the other replicas of an original client's
// registration (legacy.Registration; Removed for its end). It travels
// sealed (legacy.SealRegistration) under a key derived from the cluster
// key: NATS sees neither the client token nor a chance to change it.
//
// Only a gateway without a store shares registrations this way. One with
// a store (every replica Run starts: cluster mode requires a shared
// PostgreSQL) keeps them there and learns of the others' through the
// store's notifications, which re-read the row in commit order; a NATS
// message, unordered with them, could bring back a registration deleted
// since.
func (c *Cluster) ShareRegistration(r legacy.Registration) {
	if c.nc == nil {
		return
	}
	sealed, err := legacy.SealRegistration(c.sealKey(), r)
	if err != nil {
		c.o.Logger.Warn("cluster registration not shared", "connector", r.Name, "err", err.Error())
		return
	}
	c.publish(message{Kind: kindRegistration, Sealed: sealed})
}

func (c *Cluster) sealKey() []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("registration seal"))
	return m.Sum(nil)
}

// openRegistration opens a shared registration and checks its name, as
// decode checks the names of the other messages.
func openRegistration(key []byte, sealed string) (legacy.Registration, error) {
	r, err := legacy.OpenRegistration(key, sealed)
	if err != nil {
		return legacy.Registration{}, err
	}
	if !presence.ValidName(r.Name) {
		return legacy.Registration{}, fmt.Errorf("sealed registration: invalid connector name %q", r.Name)
	}
	return r, nil
}
