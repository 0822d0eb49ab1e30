package threads

import (
	"errors"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
)

func TestCheckRef(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"01JABCDEFGHJKMNPQRSTVWXYZ0", "01jabcdefghjkmnpqrstvwxyz0", "nonexistent-id", "a_b", strings.Repeat("a", MaxRefLen)} {
		if err := CheckRef(id); err != nil {
			t.Errorf("CheckRef(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "a.b", "..", "a/b", `a\b`, " ", "a b", `a"b`, "a\nb", "é", strings.Repeat("a", MaxRefLen+1)} {
		err := CheckRef(id)
		if !errors.Is(err, ErrInvalidRef) || !strings.Contains(err.Error(), "invalid thread id") {
			t.Errorf("CheckRef(%q) = %v, want ErrInvalidRef", id, err)
		}
	}
}

func TestResolveRefRefusesBeforeLookingAndIsNotFoundOtherwise(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	if _, err := ResolveRef(l, "../x"); !errors.Is(err, ErrInvalidRef) {
		t.Fatalf("ResolveRef(../x) = %v, want ErrInvalidRef", err)
	}
	if _, err := ResolveRef(l, "nonexistent-id"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ResolveRef(nonexistent-id) = %v, want ErrNotFound", err)
	}
}
