package cli

import "testing"

func TestClosestSuggestsOnlyLikelyMeanings(t *testing.T) {
	t.Parallel()
	commands := []string{"workflow", "thread", "cas", "run", "live", "rm", "ps", "version"}
	for _, tc := range []struct {
		typed, want string
	}{
		{"runn", "run"}, {"rnu", "run"}, {"RUN", "run"}, {"thred", "thread"}, {"wor", "workflow"},
		{"workflows", "workflow"}, {"lvie", "live"}, {"verison", "version"},
		// Nothing near, or too short to tell: no guess.
		{"frobnicate", ""}, {"", ""}, {"x", ""}, {"zz", ""}, {"deploy", ""},
	} {
		got, ok := closest(tc.typed, commands)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("closest(%q) = %q, %v; want %q", tc.typed, got, ok, tc.want)
		}
	}
	// The nearer candidate wins, whatever the order; a tie goes to the first.
	if got, _ := closest("lis", []string{"list-all", "list"}); got != "list" {
		t.Errorf("nearest of prefixes = %q", got)
	}
	if got, _ := closest("ab", []string{"abc", "abd"}); got != "abc" {
		t.Errorf("tie = %q", got)
	}
	if got, ok := closest("anything", nil); ok || got != "" {
		t.Errorf("no candidates = %q, %v", got, ok)
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"run", "run", 0}, {"runn", "run", 1},
		{"rnu", "run", 2}, {"kitten", "sitting", 3}, {"aproved", "approved", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
