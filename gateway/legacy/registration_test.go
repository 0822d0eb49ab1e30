package legacy

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func TestDecodeRegister(t *testing.T) {
	t.Parallel()
	r, secret, err := DecodeRegister(strings.NewReader(`{"name":"old","url":"ws://old/","secret":"s","clientToken":"t1"}`))
	if err != nil || secret != "s" || r != (Registration{Name: "old", URL: "ws://old/", ClientToken: "t1"}) {
		t.Fatalf("%+v %q %v", r, secret, err)
	}
	for body, want := range map[string]string{
		`not json`:              "body must be a JSON object {name, url, secret, clientToken}",
		`{"url":"ws://x"}`:      "name and url required",
		`{"name":"old"}`:        "name and url required",
		`{"name":"","url":"x"}`: "name and url required",
	} {
		if _, _, err := DecodeRegister(strings.NewReader(body)); err == nil || err.Error() != want {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestRegistrationsUpsertKeepsTheClientToken(t *testing.T) {
	t.Parallel()
	var rs Registrations
	t0 := time.Unix(1000, 0)
	if !rs.Upsert(Registration{Name: "old", URL: "ws://old/", ClientToken: "t1"}, t0) {
		t.Fatal("first registration not new")
	}
	// A heartbeat without clientToken keeps the one known.
	if rs.Upsert(Registration{Name: "old", URL: "ws://old"}, t0.Add(time.Minute)) {
		t.Fatal("heartbeat taken for a new registration")
	}
	if tok := rs.ClientToken("old"); tok != "t1" {
		t.Fatalf("client token %q", tok)
	}
	rec := rs.m["old"]
	if rec.url != "ws://old" || !rec.registeredAt.Equal(t0) || !rec.lastHeartbeat.Equal(t0.Add(time.Minute)) {
		t.Fatalf("record %+v", rec)
	}
	rs.Apply(Registration{Name: "other", URL: "ws://other", ClientToken: "t2"}, t0)
	if tok := rs.ClientToken("other"); tok != "t2" {
		t.Fatalf("applied: %q", tok)
	}
	rs.Apply(Registration{Name: "other", Removed: true}, t0)
	rs.Remove("old")
	if tok := rs.ClientToken("old") + rs.ClientToken("other"); tok != "" {
		t.Fatalf("token survived removal: %q", tok)
	}
}

func TestOpenRegistrationRefusesBadSeals(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", 32))
	good, err := SealRegistration(key, Registration{Name: "old-client", ClientToken: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(good, "old-client") {
		t.Fatalf("sealed in clear: %s", good)
	}
	raw, err := base64.StdEncoding.DecodeString(good)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	tampered := base64.StdEncoding.EncodeToString(raw)
	other, err := SealRegistration([]byte(strings.Repeat("o", 32)), Registration{Name: "old-client"})
	if err != nil {
		t.Fatal(err)
	}
	for name, sealed := range map[string]string{
		"not base64": "%%%",
		"too short":  "AAAA",
		"tampered":   tampered,
		"other key":  other,
	} {
		if r, err := OpenRegistration(key, sealed); err == nil || r.Name != "" {
			t.Errorf("%s: %+v %v", name, r, err)
		}
	}
	if r, err := OpenRegistration(key, good); err != nil || r != (Registration{Name: "old-client", ClientToken: "t"}) {
		t.Fatalf("good: %+v %v", r, err)
	}
}

func TestRegistrationsTombstones(t *testing.T) {
	t.Parallel()
	var rs Registrations
	t0 := time.Unix(1000, 0)
	if rs.Removed("old") {
		t.Fatal("removed before anything")
	}
	rs.Upsert(Registration{Name: "old", URL: "ws://old", ClientToken: "t1"}, t0)
	rs.Remove("old")
	rs.Remove("old") // twice: still one tombstone
	if !rs.Removed("old") || rs.ClientToken("old") != "" || len(rs.Names()) != 0 || rs.tombstones.Load() != 1 {
		t.Fatalf("after remove: %v %q %v %d", rs.Removed("old"), rs.ClientToken("old"), rs.Names(), rs.tombstones.Load())
	}
	// Registering again lifts it; so does a load from the store.
	rs.Upsert(Registration{Name: "old", URL: "ws://old"}, t0)
	rs.Remove("other")
	rs.Load(Registration{Name: "other", URL: "ws://other/", ClientToken: "t2"}, t0, t0.Add(time.Minute))
	if rs.Removed("old") || rs.Removed("other") || rs.tombstones.Load() != 0 || rs.ClientToken("other") != "t2" {
		t.Fatalf("after registering again: %v %v %d", rs.Removed("old"), rs.Removed("other"), rs.tombstones.Load())
	}
	if rec := rs.m["other"]; rec.url != "ws://other" || !rec.registeredAt.Equal(t0) || !rec.lastHeartbeat.Equal(t0.Add(time.Minute)) {
		t.Fatalf("loaded: %+v", rec)
	}
	// A load replaces the token, empty or not: it is what the store has.
	rs.Load(Registration{Name: "other", URL: "ws://other"}, t0, t0)
	if tok := rs.ClientToken("other"); tok != "" {
		t.Fatalf("load kept the old token: %q", tok)
	}
}

func TestRegistrationsMerge(t *testing.T) {
	t.Parallel()
	var rs Registrations
	if m, changed := rs.Merge(Registration{Name: "old", URL: "ws://old/", ClientToken: "t1"}); !changed || m != (Registration{Name: "old", URL: "ws://old", ClientToken: "t1"}) {
		t.Fatalf("new: %+v %v", m, changed)
	}
	rs.Upsert(Registration{Name: "old", URL: "ws://old", ClientToken: "t1"}, time.Unix(1, 0))
	for _, c := range []struct {
		in      Registration
		want    Registration
		changed bool
	}{
		{Registration{Name: "old", URL: "ws://old/"}, Registration{Name: "old", URL: "ws://old", ClientToken: "t1"}, false},
		{Registration{Name: "old", URL: "ws://old", ClientToken: "t1"}, Registration{Name: "old", URL: "ws://old", ClientToken: "t1"}, false},
		{Registration{Name: "old", URL: "ws://new"}, Registration{Name: "old", URL: "ws://new", ClientToken: "t1"}, true},
		{Registration{Name: "old", URL: "ws://old", ClientToken: "t2"}, Registration{Name: "old", URL: "ws://old", ClientToken: "t2"}, true},
	} {
		if m, changed := rs.Merge(c.in); m != c.want || changed != c.changed {
			t.Errorf("%+v: %+v %v", c.in, m, changed)
		}
	}
	if tok := rs.ClientToken("old"); tok != "t1" {
		t.Fatalf("Merge recorded: %q", tok)
	}
}

func TestSealToken(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", 32))
	sealed, err := SealToken(key, "old", "client-token-secret")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "client-token-secret") {
		t.Fatal("sealed in clear")
	}
	if tok, err := OpenToken(key, "old", sealed); err != nil || tok != "client-token-secret" {
		t.Fatalf("open: %q %v", tok, err)
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	for name, c := range map[string]struct {
		key    []byte
		name   string
		sealed []byte
	}{
		"other key":  {[]byte(strings.Repeat("o", 32)), "old", sealed},
		"other name": {key, "new", sealed},
		"tampered":   {key, "old", tampered},
		"too short":  {key, "old", sealed[:4]},
		"bad key":    {[]byte("short"), "old", sealed},
	} {
		if tok, err := OpenToken(c.key, c.name, c.sealed); err == nil || tok != "" {
			t.Errorf("%s: %q %v", name, tok, err)
		}
	}
	if _, err := SealToken([]byte("short"), "old", "t"); err == nil {
		t.Fatal("sealed with a bad key")
	}
}
