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
