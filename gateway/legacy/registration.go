package legacy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Registration is an original client's POST /api/gateway/register (or
// its DELETE, Removed), in the form the gateway replicas share it
// (SealRegistration): the client's socket may land on another replica than
// its registration, and that replica needs the client token to call the
// client's API.
type Registration struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// ClientToken is the token the client's local API requires as
	// X-Client-Token; the gateway adds it to every request it forwards to
	// that client over the JSON-frame socket (Options.ClientToken).
	ClientToken string `json:"clientToken,omitempty"`
	Removed     bool   `json:"removed,omitempty"`
}

// maxRegisterBody bounds the body of POST /api/gateway/register read.
const maxRegisterBody = 64 << 10

// DecodeRegister reads the body of POST /api/gateway/register, the
// original client's registration and (repeated every 60 s) heartbeat:
// {"name","url","secret","clientToken"}. secret is the connector
// credential for the name, for the caller to check. The error's text is
// what the client is answered (with 400). The original's earlier clients,
// which registered a URL of their own, called the token agentToken; it
// stands in when clientToken is absent.
func DecodeRegister(body io.Reader) (r Registration, secret string, err error) {
	var wire struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Secret      string `json:"secret"`
		ClientToken string `json:"clientToken"`
		AgentToken  string `json:"agentToken"`
	}
	if err := json.NewDecoder(io.LimitReader(body, maxRegisterBody)).Decode(&wire); err != nil {
		return Registration{}, "", errors.New("body must be a JSON object {name, url, secret, clientToken}")
	}
	if wire.Name == "" || wire.URL == "" {
		return Registration{}, "", errors.New("name and url required")
	}
	token := wire.ClientToken
	if token == "" {
		token = wire.AgentToken
	}
	return Registration{Name: wire.Name, URL: wire.URL, ClientToken: token}, wire.Secret, nil
}

// Registrations are the original clients' registrations, by name
// (docs/compatibility.md, "JSON-frame clients"). The zero value is empty
// and ready.
//
// A removed registration leaves a tombstone: the gateway answers requests
// for the name 404 and leaves it out of the endpoints list while the
// client's socket may still be connected, as the original did after an
// unregister, until the name registers again.
type Registrations struct {
	mu sync.Mutex
	m  map[string]*record
	// removed are the names unregistered since they last registered;
	// tombstones counts them, so that the gateway's every request asks
	// Removed without taking the lock while there are none.
	removed    map[string]bool
	tombstones atomic.Int64
}

// record is what is kept of a registration.
type record struct {
	url           string
	clientToken   string
	registeredAt  time.Time
	lastHeartbeat time.Time
}

// Upsert records a registration (or its heartbeat: the same call repeated)
// and reports whether it is new. An empty ClientToken keeps the one known;
// a trailing slash of the URL is dropped.
func (rs *Registrations) Upsert(r Registration, now time.Time) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*record{}
	}
	rs.bury(r.Name, false)
	rec, ok := rs.m[r.Name]
	if !ok {
		rec = &record{registeredAt: now}
		rs.m[r.Name] = rec
	}
	rec.url = strings.TrimSuffix(r.URL, "/")
	if r.ClientToken != "" {
		rec.clientToken = r.ClientToken
	}
	rec.lastHeartbeat = now
	return !ok
}

// Merge returns r as Upsert would record it, without recording it: the
// URL without its trailing slash and, when r has no ClientToken, the one
// known. changed is false when it is what is recorded already (a
// heartbeat), so the caller knows whether there is anything to save.
func (rs *Registrations) Merge(r Registration) (merged Registration, changed bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	merged = Registration{Name: r.Name, URL: strings.TrimSuffix(r.URL, "/"), ClientToken: r.ClientToken}
	rec, ok := rs.m[r.Name]
	if !ok {
		return merged, true
	}
	if merged.ClientToken == "" {
		merged.ClientToken = rec.clientToken
	}
	return merged, merged.URL != rec.url || merged.ClientToken != rec.clientToken
}

// Load records a registration as it was kept (by the store): unlike
// Upsert it keeps the times given and replaces the client token, empty
// or not.
func (rs *Registrations) Load(r Registration, registeredAt, lastHeartbeat time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*record{}
	}
	rs.bury(r.Name, false)
	rs.m[r.Name] = &record{url: strings.TrimSuffix(r.URL, "/"), clientToken: r.ClientToken, registeredAt: registeredAt, lastHeartbeat: lastHeartbeat}
}

// Remove forgets name's registration and leaves its tombstone (Removed).
func (rs *Registrations) Remove(name string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, name)
	rs.bury(name, true)
}

// bury sets or clears name's tombstone; rs.mu is held.
func (rs *Registrations) bury(name string, dead bool) {
	if rs.removed[name] == dead {
		return
	}
	if dead {
		if rs.removed == nil {
			rs.removed = map[string]bool{}
		}
		rs.removed[name] = true
		rs.tombstones.Add(1)
		return
	}
	delete(rs.removed, name)
	rs.tombstones.Add(-1)
}

// Removed reports whether name was unregistered and has not registered
// since.
func (rs *Registrations) Removed(name string) bool {
	if rs.tombstones.Load() == 0 {
		return false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.removed[name]
}

// Names returns the names registered, in no order.
func (rs *Registrations) Names() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	names := make([]string, 0, len(rs.m))
	for name := range rs.m {
		names = append(names, name)
	}
	return names
}

// Apply records r, or with r.Removed forgets it: a registration made on
// another replica.
func (rs *Registrations) Apply(r Registration, now time.Time) {
	if r.Removed {
		rs.Remove(r.Name)
		return
	}
	rs.Upsert(r, now)
}

// ClientToken is the token registered for name ("" if none).
func (rs *Registrations) ClientToken(name string) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rec, ok := rs.m[name]; ok {
		return rec.clientToken
	}
	return ""
}

// SealRegistration encodes r for the other replicas: JSON sealed with
// AES-GCM under key (16, 24 or 32 bytes), base64. Whoever carries it sees
// neither the client token nor, thanks to the MAC, a chance to change it.
func SealRegistration(key []byte, r Registration) (string, error) {
	plain, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	// crypto/rand.Read never fails (it crashes the program instead).
	_, _ = rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, nil)), nil
}

// OpenRegistration opens and checks what SealRegistration sealed under
// the same key. The name is not checked against the connector-name rule:
// that is the receiver's.
func OpenRegistration(key []byte, sealed string) (Registration, error) {
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
	return r, nil
}

// SealToken encrypts a registration's client token for the store, with
// AES-GCM under key (16, 24 or 32 bytes) and the registration's name as
// associated data: the store keeps only these bytes, so a copy of the
// database gives no access to the client, and a sealed token copied onto
// another name's row does not open.
func SealToken(key []byte, name, token string) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	// crypto/rand.Read never fails (it crashes the program instead).
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(token), []byte(name)), nil
}

// OpenToken opens what SealToken sealed for name under the same key.
func OpenToken(key []byte, name string, sealed []byte) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	if len(sealed) < aead.NonceSize() {
		return "", errors.New("sealed client token: too short")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(name))
	if err != nil {
		return "", errors.New("sealed client token: cannot open (another key, or another name's token?)")
	}
	return string(plain), nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
