package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
)

// fuzzNow is the receivers' clock in the fuzz targets: fixed, so the
// seeds' timestamps stay fresh whenever the corpus is replayed.
var fuzzNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// referenceMAC is the cluster MAC written out from its definition, an
// oracle independent of sign and signer: HMAC-SHA256 over each part as
// "<length>:<part>", hex-encoded.
func referenceMAC(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		fmt.Fprintf(m, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// FuzzDecode feeds the presence parser arbitrary bytes and MACs. It must
// never panic; it may accept a message only when the MAC is the cluster
// key's over exactly those bytes, and what it accepts must be valid. With
// signIt the fuzzer's bytes are signed correctly, so the JSON and the
// checks after the signature are explored too.
func FuzzDecode(f *testing.F) {
	for _, m := range []message{
		validMessage(fuzzNow),
		{Kind: kindUpdate, Replica: "r2", Advertise: "http://[::1]:9000", Sent: fuzzNow.UnixMilli(), Endpoints: []presence.Endpoint{{Name: "a-b", Status: presence.Offline}}},
		{Kind: kindLeave, Replica: "r3", Sent: fuzzNow.UnixMilli()},
		{Kind: kindRegistration, Replica: "r1", Advertise: "http://h:1", Sent: fuzzNow.UnixMilli(), Sealed: "AAAA"},
		{Kind: kindSnapshot, Replica: "r1", Advertise: "http://h:1", Sent: fuzzNow.UnixMilli(), Part: 2, More: true},
	} {
		data, mac, err := encode(testKey, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, mac, false)
		f.Add(data, "", true)
		f.Add(data, mac[:63]+"0", false)
	}
	f.Add([]byte(`{"kind":"update","replica":"r","advertise":"http://h:1","sent":0,"endpoints":[{"name":"-x"}]}`), "", true)
	f.Add([]byte(`{"kind":"snapshot","part":-1}`), "", true)
	f.Add([]byte(`null`), "", true)
	f.Add([]byte{0xff, '{'}, "", true)
	f.Fuzz(func(t *testing.T, data []byte, mac string, signIt bool) {
		if signIt {
			mac = referenceMAC(testKey, "presence", string(data))
		}
		m, err := decode(testKey, data, mac, fuzzNow)
		if err != nil {
			if m.Kind != "" || m.Replica != "" || m.Endpoints != nil {
				t.Fatalf("refused (%v) but returned %+v", err, m)
			}
			return
		}
		if mac != referenceMAC(testKey, "presence", string(data)) {
			t.Fatalf("accepted a message without the cluster key's MAC: %q %q", data, mac)
		}
		if err := m.validate(fuzzNow); err != nil {
			t.Fatalf("accepted an invalid message %+v: %v", m, err)
		}
		if m.Replica == "" || (m.Kind != kindLeave && m.Advertise == "") {
			t.Fatalf("accepted a message without sender: %+v", m)
		}
	})
}

// FuzzVerifyHop feeds the hop-header check arbitrary headers, methods and
// paths. It must never panic, and it may accept a header only when its MAC
// is the cluster key's over the replica, timestamp, method and path, and
// the timestamp is within hopSkew of the receiver's clock.
func FuzzVerifyHop(f *testing.F) {
	c, err := New(Options{NATS: "nats://127.0.0.1:1", ReplicaID: "r1", Advertise: "http://127.0.0.1:1", Key: testKey})
	if err != nil {
		f.Fatal(err)
	}
	c.now = func() time.Time { return fuzzNow }
	good := c.hop("GET", "/api/clients/laptop/workflows", "", fuzzNow)
	f.Add(good, "GET", "/api/clients/laptop/workflows")
	f.Add(good, "POST", "/api/clients/laptop/workflows")
	f.Add(good, "GET", "/api/clients/laptop/workflow")
	f.Add(c.hop("DELETE", "/", "", fuzzNow.Add(-hopSkew)), "DELETE", "/")
	f.Add(c.hop("GET", "/x", "", fuzzNow.Add(hopSkew+time.Second)), "GET", "/x")
	f.Add(strings.Replace(good, ".r1", ".r2", 1), "GET", "/api/clients/laptop/workflows")
	f.Add("1.abc.r2", "GET", "/")
	f.Add("..", "GET", "/")
	f.Add("", "GET", "/")
	f.Add("-9223372036854775808.0.r", "GET", "/")
	f.Fuzz(func(t *testing.T, header, method, path string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}}
		r.Header.Set(HopHeader, header)
		replica, err := c.VerifyHop(r)
		if err != nil {
			if replica != "" {
				t.Fatalf("refused (%v) but named replica %q", err, replica)
			}
			return
		}
		got := r.Header.Get(HopHeader)
		ts, rest, _ := strings.Cut(got, ".")
		mac, sender, _ := strings.Cut(rest, ".")
		if sender != replica || replica == "" {
			t.Fatalf("accepted %q as from %q", got, replica)
		}
		if mac != referenceMAC(c.key, "hop", replica, ts, method, r.URL.Path) {
			t.Fatalf("accepted a hop header without the cluster key's MAC: %q %s %q", got, method, r.URL.Path)
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			t.Fatalf("accepted a malformed timestamp %q", ts)
		}
		if d := fuzzNow.Sub(time.Unix(sec, 0)); d > hopSkew || d < -hopSkew {
			t.Fatalf("accepted a hop header %s off the clock", d)
		}
	})
}
