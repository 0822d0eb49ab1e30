package ids

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestHashVectors(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"", "XX3DPDTHV3MSJ"},
		{"hello", "4V3R4ZC8KXPT6"},
		{"hello world", "8PNPED5J3SMPG"},
		{"type: content\npayload: hello\nrefs: []\n", "SSVQ0RZ55P9Y4"},
		{"type: content\npayload: prompt-text\nrefs: []\n", "D7V7WGCMTYHZG"},
	}
	for _, c := range cases {
		if got := HashString(c.in); got != c.want {
			t.Errorf("HashString(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := HashBytes([]byte(c.in)); got != c.want {
			t.Errorf("HashBytes(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestEncodeUint64Vectors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    uint64
		want string
	}{
		{0, "0000000000000"},
		{math.MaxUint64, "ZZZZZZZZZZZZY"},
		{0xdeadbeefcafebabe, "VTPVXVYAZTXBW"},
		{0xef46db3751d8e999, "XX3DPDTHV3MSJ"},
	}
	for _, c := range cases {
		got := EncodeUint64(c.v)
		if got != c.want {
			t.Errorf("EncodeUint64(%#x) = %s, want %s", c.v, got, c.want)
		}
		back, err := DecodeUint64(got)
		if err != nil || back != c.v {
			t.Errorf("DecodeUint64(%s) = %#x, %v; want %#x", got, back, err, c.v)
		}
		lower, err := DecodeUint64(strings.ToLower(got))
		if err != nil || lower != c.v {
			t.Errorf("DecodeUint64(lower %s) = %#x, %v", got, lower, err)
		}
	}
}

func TestDecodeUint64Errors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":               "encoded length does not match",
		"ABC":            "encoded length does not match",
		"00000000000000": "encoded length does not match",
		"000000000000U":  "invalid Crockford Base32 character: 'U'",
		"00000000I0000":  "invalid Crockford Base32 character: 'I'",
		"0000000000001":  "padding bit",
	}
	for in, want := range cases {
		_, err := DecodeUint64(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeUint64(%q) error = %v, want containing %q", in, err, want)
		}
	}
}

func TestParseHash(t *testing.T) {
	t.Parallel()
	got, err := ParseHash("ssvq0rz55p9y4")
	if err != nil || got != "SSVQ0RZ55P9Y4" {
		t.Fatalf("ParseHash lower = %q, %v", got, err)
	}
	// Hand-written fixture hashes with an odd last char stay usable as names.
	if _, err := ParseHash("C9NMV6V2TQT81"); err != nil {
		t.Fatalf("legacy fixture hash rejected: %v", err)
	}
	for _, bad := range []string{"", "../../etc/pa", "../../etc/pas", "SSVQ0RZ55P9Y", "SSVQ0RZ55P9Y4X", "SSVQ0RZ55P9Y/", "SSVQ0RZ55P9YU", "SSVQ0RZ\x0055P9"} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		} else if !strings.HasPrefix(err.Error(), "invalid hash") {
			t.Errorf("ParseHash(%q) error %q lacks prefix", bad, err)
		}
	}
	if !IsHash("SSVQ0RZ55P9Y4") || IsHash("ssvq0rz55p9y4") || IsHash("SSVQ0RZ55P9Y4.txt") {
		t.Error("IsHash wrong")
	}
}

func TestThreadIDs(t *testing.T) {
	// Serial: NewThreadID's entropy is process-wide, and another test's id at another millisecond reseeds it.
	now := time.UnixMilli(1778000000000)
	prev := ""
	for i := 0; i < 1000; i++ {
		id := NewThreadID(now)
		if len(id) != ThreadIDLen {
			t.Fatalf("len(%q) = %d", id, len(id))
		}
		if _, err := ParseThreadID(id); err != nil {
			t.Fatalf("own id rejected: %v", err)
		}
		if id <= prev {
			t.Fatalf("ids not monotonic within one ms: %s after %s", id, prev)
		}
		prev = id
	}
	// The original's ids are accepted too.
	if got, err := ParseThreadID("06ezj3qm0000000000000000a0"); err != nil || got != "06EZJ3QM0000000000000000A0" {
		t.Fatalf("legacy id: %q %v", got, err)
	}
	for _, bad := range []string{"", "01AAA1111111111111111111", "../../../../../../etc/passw", "01KQXKW18CT8G75T53R8F4G7YGX", "01KQXKW18CT8G75T53R8F4G7Y!"} {
		if _, err := ParseThreadID(bad); err == nil {
			t.Errorf("ParseThreadID(%q) accepted", bad)
		}
	}
}

func FuzzParseHash(f *testing.F) {
	for _, s := range []string{"SSVQ0RZ55P9Y4", "", "../x", "ZZZZZZZZZZZZY", "zzzzzzzzzzzzy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHash(s)
		if err != nil {
			return
		}
		if !IsHash(h) || !strings.EqualFold(h, s) {
			t.Fatalf("ParseHash(%q) = %q: not a canonical hash", s, h)
		}
		if v, err := DecodeUint64(h); err == nil && EncodeUint64(v) != h {
			t.Fatalf("round trip of %q gave %q", h, EncodeUint64(v))
		}
	})
}

func TestThreadIDTime(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1796032800123)
	got, ok := ThreadIDTime(NewThreadID(at))
	if !ok || !got.Equal(at) {
		t.Fatalf("standard ULID time = %v %v, want %v", got, ok, at)
	}
	// The original's encoding: (ms << 80 | random) << 2, in 26 quintets.
	legacy := legacyID(1778000000000)
	if !strings.HasPrefix(legacy, "06EZJ3QM") {
		t.Fatalf("legacy id generator wrong: %s", legacy)
	}
	got, ok = ThreadIDTime(legacy)
	if !ok || got.UnixMilli() != 1778000000000 {
		t.Fatalf("legacy id time = %v %v", got, ok)
	}
	if _, ok := ThreadIDTime("ZZZZZZZZZZZZZZZZZZZZZZZZZZ"); ok {
		t.Fatal("implausible id got a time")
	}
	if _, ok := ThreadIDTime("short"); ok {
		t.Fatal("invalid id got a time")
	}
}

// legacyID encodes like the original's generateUlid with zero randomness.
func legacyID(ms uint64) string {
	// 130 bits: ms (48) | random (80) | pad (2); emit quintets MSB first.
	var bits [130]byte
	for i := 0; i < 48; i++ {
		bits[i] = byte(ms >> (47 - i) & 1)
	}
	out := make([]byte, 26)
	for q := 0; q < 26; q++ {
		v := 0
		for b := 0; b < 5; b++ {
			v = v<<1 | int(bits[q*5+b])
		}
		out[q] = Alphabet[v]
	}
	return string(out)
}
