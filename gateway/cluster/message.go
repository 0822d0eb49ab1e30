package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
)

// Kinds of presence message.
const (
	// kindSnapshot replaces everything the receiver knows of the sender:
	// the connectors listed are all the sender holds.
	kindSnapshot = "snapshot"
	// kindUpdate changes the connectors listed and leaves the others.
	kindUpdate = "update"
	// kindLeave says the sender is shutting down: its connectors are about
	// to reconnect elsewhere.
	kindLeave = "leave"
	// kindRegistration shares an original client's registration
	// (registration.go).
	kindRegistration = "registration"
	// kindHello is a replica that just (re)connected to NATS asking the
	// others for their snapshots, on its own subject. Signed like the rest,
	// so that nobody else on NATS can make every replica republish
	// everything it holds.
	kindHello = "hello"
)

// message is what replicas publish on NATS. It is signed (macHeader) with
// the cluster key, so a NATS account alone cannot steer dashboard
// requests, and their credentials, to an address of its choosing.
type message struct {
	Kind      string `json:"kind"`
	Replica   string `json:"replica"`
	Advertise string `json:"advertise"`
	Sent      int64  `json:"sent"` // ms since the epoch
	// Part numbers the parts of a snapshot too large for one message
	// (from 0); More says another part follows.
	Part      int                 `json:"part,omitempty"`
	More      bool                `json:"more,omitempty"`
	Endpoints []presence.Endpoint `json:"endpoints,omitempty"`
	// Peers, on a snapshot's last part, are the other replicas its sender
	// hears: whom a replica catching up waits for (catchup.go).
	Peers []string `json:"peers,omitempty"`
	// Sealed is a kindRegistration's legacy.Registration, sealed
	// (legacy.SealRegistration).
	Sealed string `json:"sealed,omitempty"`
}

// macHeader is the NATS header carrying a message's HMAC.
const macHeader = "Uncaged-Mac"

// maxMessageAge is how old (or how far in the future, for clocks that
// disagree) a message may be. Older ones are replays or stuck buffers and
// would resurrect connectors that have moved on.
const maxMessageAge = 2 * time.Minute

// sign returns the HMAC of parts under key, hex-encoded.
func sign(key []byte, parts ...string) string {
	return macOf(hmac.New(sha256.New, key), parts)
}

func macOf(m hash.Hash, parts []string) string {
	// One write of everything: the hash takes no strings, and a write per
	// part would copy each to the heap.
	n := 0
	for _, p := range parts {
		n += len(p) + 21
	}
	buf := make([]byte, 0, n)
	for _, p := range parts {
		// Length-prefixed, so two different part lists never hash alike.
		buf = strconv.AppendInt(buf, int64(len(p)), 10)
		buf = append(buf, ':')
		buf = append(buf, p...)
	}
	m.Write(buf)
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0]))
}

// signer is sign for one key, reusing its HMAC states: every forwarded
// request is signed by one replica and checked by another, and a fresh
// HMAC costs two extra SHA-256 blocks and allocations each time.
type signer struct{ pool sync.Pool }

func newSigner(key []byte) *signer {
	s := &signer{}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

func (s *signer) sign(parts ...string) string {
	m := s.pool.Get().(hash.Hash)
	defer s.pool.Put(m)
	m.Reset()
	return macOf(m, parts)
}

// encode marshals and signs m.
func encode(key []byte, m message) (data []byte, mac string, err error) {
	data, err = json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	return data, sign(key, "presence", string(data)), nil
}

// decode checks a message's signature, age and content.
func decode(key []byte, data []byte, mac string, now time.Time) (message, error) {
	var m message
	if mac == "" {
		return m, errors.New("unsigned message")
	}
	want := sign(key, "presence", string(data))
	if !hmac.Equal([]byte(mac), []byte(want)) {
		return m, errors.New("bad signature (is every replica using the same gateway key?)")
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return message{}, fmt.Errorf("malformed message: %w", err)
	}
	if err := m.validate(now); err != nil {
		return message{}, err
	}
	for i := range m.Endpoints {
		m.Endpoints[i].Instance = announcedInstance(m.Endpoints[i].Instance)
	}
	return m, nil
}

// announcedInstance is an announced connector's instance as this replica
// keeps it: a fingerprint as it is, and the bare instance id a replica of
// an older version announces as its fingerprint, so that the two compare
// as their connections would (presence.Differs) and the id is shown
// nowhere. validate has refused anything else.
func announcedInstance(s string) string {
	if s == "" || presence.ValidFingerprint(s) {
		return s
	}
	fp, _ := presence.InstanceOf(s, "") // validate checked it
	return fp
}

func (m message) validate(now time.Time) error {
	switch m.Kind {
	case kindSnapshot, kindUpdate, kindLeave, kindRegistration, kindHello:
	default:
		return fmt.Errorf("unknown message kind %q", m.Kind)
	}
	if m.Replica == "" {
		return errors.New("message without a replica id")
	}
	if m.Part < 0 || ((m.Part > 0 || m.More) && m.Kind != kindSnapshot) {
		return fmt.Errorf("message from %s: parts are for snapshots only", m.Replica)
	}
	if age := now.Sub(time.UnixMilli(m.Sent)); age > maxMessageAge || age < -maxMessageAge {
		return fmt.Errorf("message from %s is %s old: replayed, or the clocks disagree", m.Replica, age.Round(time.Second))
	}
	if m.Kind == kindHello && len(m.Endpoints) > 0 {
		return fmt.Errorf("message from %s: a hello carries no connectors", m.Replica)
	}
	if (m.Kind == kindRegistration) != (m.Sealed != "") {
		return fmt.Errorf("message from %s: a sealed registration is a registration's only content", m.Replica)
	}
	if m.Kind != kindLeave {
		if _, err := parseAdvertise(m.Advertise); err != nil {
			return fmt.Errorf("replica %s: %w", m.Replica, err)
		}
	}
	for _, e := range m.Endpoints {
		if !presence.ValidName(e.Name) {
			return fmt.Errorf("replica %s announced an invalid connector name %q", m.Replica, e.Name)
		}
		if e.Status != presence.Online && e.Status != presence.Offline {
			return fmt.Errorf("replica %s announced %s with status %q", m.Replica, e.Name, e.Status)
		}
		if _, err := presence.InstanceOf(e.Instance, ""); e.Instance != "" && !presence.ValidFingerprint(e.Instance) && err != nil {
			return fmt.Errorf("replica %s announced %s with an invalid instance", m.Replica, e.Name)
		}
	}
	return nil
}

// parseAdvertise checks a replica's internal address: an http URL with a
// host and nothing after it (h2c is plain text; TLS between replicas is the
// network's business, as it is for NATS).
func parseAdvertise(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("advertise address %q: %w", s, err)
	case u.Scheme != "http":
		return nil, fmt.Errorf("advertise address %q: must be http://host:port", s)
	case u.Host == "" || u.Port() == "":
		return nil, fmt.Errorf("advertise address %q: needs a host and a port", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "":
		return nil, fmt.Errorf("advertise address %q: only http://host:port", s)
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil
}
