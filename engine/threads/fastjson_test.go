package threads

import (
	"reflect"
	"testing"
)

var indexSeeds = []string{
	"{}", "{\n}\n", `{"a":{"head":"H","start":"S","updatedAt":1}}`,
	"{\n  \"06EZ\": {\n    \"head\": \"H\",\n    \"start\": \"S\",\n    \"updatedAt\": 1778000100000\n  }\n}\n",
	`{"a":{"head":"H","start":"S","updatedAt":1},"a":{"head":"H"}}`,
	`{"a":{"head":1,"start":"S","updatedAt":1},"b":{"head":"H","start":"S","updatedAt":2.5}}`,
	`{"a":{"head":"H","start":"S","updatedAt":1,"extra":"x"}}`,
	`{"a":{"head":"H\u00e9","start":"S","updatedAt":1}}`,
	`{"a":{"head":"H","start":"S","updatedAt":1e3}}`,
	`{"a":7}`, `[1]`, `{"a":{"head":null,"start":"S","updatedAt":1}}`, `{"a":{}}`, `{"a":{"head":"H","start":"S","updatedAt":-0}}`,
}

// FuzzIndexFastPathAgrees checks that the fast scanner, whenever it accepts
// a file, reads it exactly as encoding/json does.
func FuzzIndexFastPathAgrees(f *testing.F) {
	for _, s := range indexSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := scanIndex(b)
		if !ok {
			return
		}
		if slow := decodeIndex(b); !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %v != slow %v for %q", fast, slow, b)
		}
	})
}

func FuzzHistoryFastPathAgrees(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"T","head":"H","start":"S","completedAt":1778000002000}`,
		`{"threadId":"T","head":"H","start":"S"}`, `{"threadId":5,"head":"H","start":"S","completedAt":1}`,
		`{"completedAt":1,"start":"S","head":"H","threadId":"T","x":"y"}`, `{"threadId":"T\n"}`, `not json`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, valid, ok := scanHistoryLine(b)
		if !ok {
			return
		}
		slow, slowValid := decodeHistoryLine(b)
		if valid != slowValid || (valid && fast != slow) {
			t.Fatalf("fast %v/%v != slow %v/%v for %q", fast, valid, slow, slowValid, b)
		}
	})
}

func TestFastPathTakesTheCommonLayouts(t *testing.T) {
	for _, s := range indexSeeds[:4] {
		if _, ok := scanIndex([]byte(s)); !ok {
			t.Errorf("fast path refused %q", s)
		}
	}
	idx, _ := scanIndex([]byte(indexSeeds[4]))
	if len(idx) != 0 {
		t.Errorf("invalid later duplicate must drop the entry: %v", idx)
	}
	if _, _, ok := scanHistoryLine([]byte(`{"threadId":"T","head":"H","start":"S","completedAt":1}`)); !ok {
		t.Error("fast path refused a canonical history line")
	}
}
