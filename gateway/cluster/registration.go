package cluster

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Registration is an original client's POST /api/gateway/register (or
// its DELETE, Removed) as the replicas share it. The client's socket may
// land on another replica than its registration, and that replica needs
// the client token to call the client's API.
type Registration struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	ClientToken string `json:"clientToken,omitempty"`
	Removed     bool   `json:"removed,omitempty"`
}

// ShareRegistration tells the other replicas of an original client's
// registration. The client token travels sealed (AES-GCM): NATS sees
// neither it nor, thanks to the MAC, a chance to change it.
func (c *Cluster) ShareRegistration(r Registration) {
	if c.nc == nil {
		return
	}
	sealed, err := seal(c.sealKey(), r)
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

func seal(key []byte, r Registration) (string, error) {
	plain, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, nil)), nil
}

// unseal opens and checks a shared registration.
func unseal(key []byte, sealed string) (Registration, error) {
	var r Registration
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return r, errors.New("sealed registration: not base64")
	}
	aead, err := newAEAD(key)
	if err != nil {
		return r, err
	}
	if len(raw) < aead.NonceSize() {
		return r, errors.New("sealed registration: too short")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], nil)
	if err != nil {
		return r, errors.New("sealed registration: cannot open (another key?)")
	}
	if err := json.Unmarshal(plain, &r); err != nil {
		return Registration{}, fmt.Errorf("sealed registration: %w", err)
	}
	if !nameRule.MatchString(r.Name) {
		return Registration{}, fmt.Errorf("sealed registration: invalid connector name %q", r.Name)
	}
	return r, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
