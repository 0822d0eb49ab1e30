package cli

import (
	"strings"
	"testing"
	"time"
)

func TestRelativeTimesAndCompactDurations(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "just now"}, {4 * time.Second, "just now"}, {30 * time.Second, "30 seconds ago"},
		{time.Minute, "1 minute ago"}, {3*time.Minute + 59*time.Second, "3 minutes ago"},
		{time.Hour, "1 hour ago"}, {47 * time.Hour, "47 hours ago"}, {72 * time.Hour, "3 days ago"},
		{90 * 24 * time.Hour, "3 months ago"}, {800 * 24 * time.Hour, "2 years ago"},
		{-time.Hour, "in the future"},
	} {
		if got := relativeTime(now.Add(-tc.ago), now); got != tc.want {
			t.Errorf("relativeTime(-%s) = %q, want %q", tc.ago, got, tc.want)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {59 * time.Second, "59s"}, {61 * time.Second, "1m1s"},
		{10 * time.Minute, "10m"}, {59 * time.Minute, "59m"}, {2*time.Hour + 5*time.Minute, "2h5m"},
		{15 * time.Hour, "15h"}, {50 * time.Hour, "2d2h"}, {400 * 24 * time.Hour, "400d"},
	} {
		if got := compactDuration(tc.d); got != tc.want {
			t.Errorf("compactDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestTableAlignsColumns(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tb := newTable(&b, "A", "LONGER", "C")
	tb.row("wide-cell", "x", "é")
	tb.row("y", "", "last")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "A          LONGER  C\n" +
		"wide-cell  x       é\n" +
		"y                  last\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant\n%s", b.String(), want)
	}
}
