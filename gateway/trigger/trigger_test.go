package trigger

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A signature verifies exactly the body it was made for under exactly
// its secret, in either header: any other body, secret, or header value
// is refused, and no signature at all says how to sign.
func TestVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		secret := NewSecret()
		body := make([]byte, rng.IntN(2000))
		for j := range body {
			body[j] = byte(rng.IntN(256))
		}
		sig := Sign(secret, body)
		for _, name := range []string{GitHubSignatureHeader, SignatureHeader} {
			h := http.Header{}
			h.Set(name, sig)
			if err := Verify(secret, h, body); err != nil {
				t.Fatalf("a good signature in %s refused: %v", name, err)
			}
		}
		// One bit of the body, the secret or the signature changed.
		flipped := append([]byte(nil), body...)
		if len(flipped) > 0 {
			flipped[rng.IntN(len(flipped))] ^= 1 << rng.IntN(8)
		} else {
			flipped = []byte{0}
		}
		badSig := []byte(sig)
		k := len("sha256=") + rng.IntN(64)
		badSig[k] = "0123456789abcdef"[(strings.IndexByte("0123456789abcdef", badSig[k])+1)%16]
		for _, c := range []struct {
			secret, sig string
			body        []byte
		}{
			{secret, sig, flipped},
			{secret + "x", sig, body},
			{secret, string(badSig), body},
			{secret, strings.TrimPrefix(sig, "sha256="), body},
			{secret, "sha1=" + strings.TrimPrefix(sig, "sha256="), body},
			{secret, strings.ToUpper(sig), body},
			{secret, "", body},
			{"", Sign("", body), body},
		} {
			h := http.Header{}
			h.Set(GitHubSignatureHeader, c.sig)
			if err := Verify(c.secret, h, c.body); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("secret %q sig %q: %v, want ErrBadSignature", c.secret, c.sig, err)
			}
		}
		// Both headers: both must match.
		h := http.Header{}
		h.Set(GitHubSignatureHeader, sig)
		h.Set(SignatureHeader, string(badSig))
		if err := Verify(secret, h, body); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("one good and one bad header: %v", err)
		}
	}
	if err := Verify(NewSecret(), http.Header{}, []byte("{}")); !errors.Is(err, ErrNoSignature) || !strings.Contains(err.Error(), GitHubSignatureHeader) {
		t.Fatalf("no header: %v", err)
	}
}

func TestSecretsDiffer(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b || len(a) != 64 {
		t.Fatalf("secrets %q %q", a, b)
	}
}

func TestDeliveryID(t *testing.T) {
	for _, c := range []struct {
		github, own, want, err string
	}{
		{"", "", "", ""},
		{"72d3162e-cc78-11e3-81ab-4c9367dc0958", "", "72d3162e-cc78-11e3-81ab-4c9367dc0958", ""},
		{"", "d-1", "d-1", ""},
		{"same", "same", "same", ""},
		{"one", "two", "", "different deliveries"},
		{"has space", "", "", "printable ASCII"},
		{"tab\t", "", "", "printable ASCII"},
		{"é", "", "", "printable ASCII"},
		{strings.Repeat("x", MaxDeliveryID+1), "", "", "longer than"},
		{strings.Repeat("x", MaxDeliveryID), "", strings.Repeat("x", MaxDeliveryID), ""},
	} {
		h := http.Header{}
		if c.github != "" {
			h.Set(GitHubDeliveryHeader, c.github)
		}
		if c.own != "" {
			h.Set(DeliveryHeader, c.own)
		}
		got, err := DeliveryID(h)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q/%q: %q, %v; want an error with %q", c.github, c.own, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q/%q: %q, %v; want %q", c.github, c.own, got, err, c.want)
		}
	}
}

func TestRender(t *testing.T) {
	issue := `{"action":"labeled","issue":{"number":42,"title":"Crash on start","labels":[{"name":"bug"},{"name":"agent"}]},"n":1.5}`
	for _, c := range []struct {
		tmpl, body, want, err string
	}{
		{"", issue, issue, ""},
		{"Fix #{{.issue.number}}: {{.issue.title}}", issue, "Fix #42: Crash on start", ""},
		{"{{range .issue.labels}}{{.name}} {{end}}", issue, "bug agent ", ""},
		{"{{.n}}", issue, "1.5", ""},
		{"{{.issue.missing}}", issue, "", "missing"},
		{"{{.issue.title}}", "not json", "", "not JSON"},
		{"{{.issue.title}}", issue + issue, "", "more than one JSON value"},
		{"{{.a}}", `{"a":"x"}`, "x", ""},
		{"[{{.issue.body}}]{{if .issue.body}} has a body{{end}}", `{"issue":{"body":null}}`, "[]", ""},
		{"{{range .xs}}<{{.}}>{{end}}", `{"xs":[1,null,"z"]}`, "<1><><z>", ""},
		{"", "\xff\xfe", "", "not UTF-8"},
		{"{{.a", `{"a":1}`, "", "prompt template"},
		{`{{range $i := .xs}}{{$i}}{{end}}`, `{"xs":[` + strings.Repeat(`"`+strings.Repeat("y", 1000)+`",`, 300) + `"z"]}`, "", "longer than"},
		{"", strings.Repeat("a", MaxPrompt+1), "", "longer than"},
	} {
		got, err := Render(c.tmpl, []byte(c.body))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Render(%q): %q, %v; want an error with %q", c.tmpl, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Render(%q): %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
	if _, err := ParseTemplate(strings.Repeat("x", MaxTemplate+1)); err == nil {
		t.Error("an over-long template parsed")
	}
}

func TestParseSchedule(t *testing.T) {
	for _, c := range []struct{ expr, tz, err string }{
		{"* * * * *", "", ""},
		{"0 2 * * *", "Europe/Berlin", ""},
		{"@daily", "America/New_York", ""},
		{"@every 90s", "", ""},
		{"*/15 9-17 * * 1-5", "Asia/Tokyo", ""},
		{"", "", "empty"},
		{"   ", "", "empty"},
		{"* * * *", "", "schedule"},
		{"* * * * * *", "", "schedule"},
		{"61 * * * *", "", "schedule"},
		{"hello", "", "schedule"},
		{"CRON_TZ=UTC * * * * *", "", "--timezone"},
		{"* * * * *", "Mars/Olympus", "unknown time zone"},
	} {
		_, err := ParseSchedule(c.expr, c.tz)
		if c.err == "" && err != nil {
			t.Errorf("%q in %q: %v", c.expr, c.tz, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q in %q: %v; want an error with %q", c.expr, c.tz, err, c.err)
		}
	}
}

// A schedule is read in its time zone, across a change of daylight
// saving time, and Latest finds the last time it fired in a window: none
// before the first, the last of many missed ones, the one just passed.
func TestScheduleTimes(t *testing.T) {
	berlin, err := ParseSchedule("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	winter := berlin.Next(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC))
	summer := berlin.Next(time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 1, 11, 1, 0, 0, 0, time.UTC); !winter.Equal(want) {
		t.Errorf("winter: %s, want %s", winter, want)
	}
	if want := time.Date(2026, 7, 11, 0, 0, 0, 0, time.UTC); !summer.Equal(want) {
		t.Errorf("summer: %s, want %s", summer, want)
	}
	if winter.Location() != time.UTC {
		t.Errorf("Next is not in UTC: %s", winter.Location())
	}

	minutely, _ := ParseSchedule("* * * * *", "")
	from := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want time.Time
		ok   bool
	}{
		{from.Add(20 * time.Second), time.Time{}, false},
		{from.Add(30 * time.Second), time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC), true},
		{from.Add(3 * time.Hour), time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC), true},
		{from.Add(1000 * 24 * time.Hour), time.Date(2028, 11, 25, 10, 0, 0, 0, time.UTC), true},
	} {
		got, ok := minutely.Latest(from, c.now)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("Latest(%s, %s) = %s %v, want %s %v", from, c.now, got, ok, c.want, c.ok)
		}
	}
	never, _ := ParseSchedule("0 0 30 2 *", "")
	if n := never.Next(from); !n.IsZero() {
		t.Errorf("30 February: %s", n)
	}
	if _, ok := never.Latest(from, from.Add(time.Hour)); ok {
		t.Error("30 February fired")
	}
}

// FuzzDelivery feeds what a webhook's sender controls — the body, the
// template's input, the signature and delivery headers — through what the
// gateway does with them: nothing panics, a prompt is made only from a
// valid body and stays within its bound, and a signature verifies only
// when it is the body's under the secret.
func FuzzDelivery(f *testing.F) {
	f.Add([]byte(`{"issue":{"number":1,"title":"t"}}`), "Fix #{{.issue.number}}: {{.issue.title}}", "sha256=00", "d-1")
	f.Add([]byte("plain"), "", "", "")
	f.Add([]byte(`{"a":[1,2,3]}`), "{{range .a}}{{.}}{{end}}", "sha1=x", "x y")
	f.Add([]byte("\xff"), "{{.a", "sha256=", "\x00")
	const secret = "fuzz-secret"
	f.Fuzz(func(t *testing.T, body []byte, tmpl, signature, delivery string) {
		if p, err := Render(tmpl, body); err == nil && len(p) > MaxPrompt {
			t.Fatalf("a prompt of %d bytes", len(p))
		}
		h := http.Header{}
		h.Set(SignatureHeader, signature)
		h.Set(DeliveryHeader, delivery)
		if err := Verify(secret, h, body); err == nil && signature != Sign(secret, body) && strings.TrimSpace(signature) != Sign(secret, body) {
			t.Fatalf("signature %q verified for a body it was not made for", signature)
		}
		if id, err := DeliveryID(h); err == nil && id != "" && id != h.Get(DeliveryHeader) {
			t.Fatalf("delivery id %q from header %q", id, h.Get(DeliveryHeader))
		}
	})
}
