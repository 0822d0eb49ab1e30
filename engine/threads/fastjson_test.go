package threads

import (
	"reflect"
	"testing"
)

var indexSeeds = []string{
	"{}", "{\n}\n", `{"a":{"head":"H000000000000","start":"S000000000000","updatedAt":1}}`,
	"{\n  \"06EZ\": {\n    \"head\": \"H000000000000\",\n    \"start\": \"S000000000000\",\n    \"updatedAt\": 1778000100000\n  }\n}\n",
	`{"a":{"head":"H000000000000","start":"S000000000000","updatedAt":1},"a":{"head":"H000000000000"}}`,
	`{"a":{"head":"H","start":"S","updatedAt":1}}`, `{"a":{"head":"h000000000000","start":"S000000000000","updatedAt":1}}`,
	`{"a":{"head":1,"start":"S","updatedAt":1},"b":{"head":"H","start":"S","updatedAt":2.5}}`,
	`{"a":{"head":"H","start":"S","updatedAt":1,"extra":"x"}}`,
	`{"a":{"head":"H\u00e9","start":"S","updatedAt":1}}`,
	`{"a":{"head":"H","start":"S","updatedAt":1e3}}`,
	`{"a":7}`, `[1]`, `{"a":{"head":null,"start":"S","updatedAt":1}}`, `{"a":{}}`, `{"a":{"head":"H","start":"S","updatedAt":-0}}`,
}

// FuzzIndexFastPathAgrees checks that the fast scanner, whenever it accepts
// a file, reads it exactly as encoding/json does, damage and its place
// included.
func FuzzIndexFastPathAgrees(f *testing.F) {
	for _, s := range indexSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, fastFlaw, ok := scanIndex(b)
		if !ok {
			return
		}
		slow, slowFlaw := decodeIndex(b)
		if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fastFlaw, slowFlaw) {
			t.Fatalf("fast %v %+v != slow %v %+v for %q", fast, fastFlaw, slow, slowFlaw, b)
		}
	})
}

func FuzzHistoryFastPathAgrees(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"T","head":"H","start":"S","completedAt":1778000002000}`,
		`{"threadId":"T","head":"H000000000000","start":"S000000000000","completedAt":1778000002000}`,
		`{"threadId":"T","head":"H","start":"S"}`, `{"threadId":5,"head":"H","start":"S","completedAt":1}`,
		`{"completedAt":1,"start":"S","head":"H","threadId":"T","x":"y"}`, `{"threadId":"T\n"}`, `not json`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, reason, ok := scanHistoryLine(b)
		if !ok {
			return
		}
		slow, slowReason := decodeHistoryLine(b)
		if reason != slowReason || fast != slow {
			t.Fatalf("fast %v/%q != slow %v/%q for %q", fast, reason, slow, slowReason, b)
		}
	})
}

func TestFastPathTakesTheCommonLayouts(t *testing.T) {
	t.Parallel()
	for _, s := range indexSeeds[:4] {
		if _, fl, ok := scanIndex([]byte(s)); !ok || fl != nil {
			t.Errorf("fast path refused %q", s)
		}
	}
	idx, fl, _ := scanIndex([]byte(indexSeeds[4]))
	if len(idx) != 0 || fl == nil {
		t.Errorf("invalid later duplicate must drop the entry and be damage: %v %v", idx, fl)
	}
	if _, reason, ok := scanHistoryLine([]byte(`{"threadId":"T","head":"H000000000000","start":"S000000000000","completedAt":1}`)); !ok || reason != "" {
		t.Error("fast path refused a canonical history line")
	}
}
