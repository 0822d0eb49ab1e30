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
// what the client is answered (with 400).
func DecodeRegister(body io.Reader) (r Registration, secret string, err error) {
	var wire struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Secret      string `json:"secret"`
		ClientToken string `json:"clientToken"`
	}
	if err := json.NewDecoder(io.LimitReader(body, maxRegisterBody)).Decode(&wire); err != nil {
		return Registration{}, "", errors.New("body must be a JSON object {name, url, secret, clientToken}")
	}
	if wire.Name == "" || wire.URL == "" {
		return Registration{}, "", errors.New("name and url required")
	}
	return Registration{Name: wire.Name, URL: wire.URL, ClientToken: wire.ClientToken}, wire.Secret, nil
}

// Registrations are the original clients' registrations, by name
// (docs/compatibility.md, "JSON-frame clients"). The zero value is empty
// and ready.
type Registrations struct {
	mu sync.Mutex
	m  map[string]*record
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

// Remove forgets name's registration.
func (rs *Registrations) Remove(name string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, name)
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

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
