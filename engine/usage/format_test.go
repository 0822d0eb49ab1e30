package usage

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The rows of the cost contract (the dashboard's formatCost has the same
// table), then edges of each rule.
func TestFormatCost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		usd  float64
		want string
	}{
		{math.NaN(), "—"},
		{-0.5, "—"},
		{math.Inf(1), "—"},
		{math.Inf(-1), "—"},
		{0, "$0"},
		{0.0000001, "<$0.001"},
		{0.00029, "<$0.001"},
		{0.000999, "<$0.001"},
		{0.001, "$0.001"},
		{0.00123, "$0.00123"},
		{0.012, "$0.012"},
		{0.0456, "$0.0456"},
		{0.123456, "$0.123"},
		{0.5, "$0.50"},
		{0.9996, "$1.00"},
		{1.5, "$1.50"},
		{123.456, "$123.46"},
		{1234.5, "$1234.50"},
		// Edges.
		{math.Copysign(0, -1), "$0"},
		{-math.SmallestNonzeroFloat64, "—"},
		{math.SmallestNonzeroFloat64, "<$0.001"},
		{0.00099999, "<$0.001"}, // below the threshold, even if it would round up to it
		{0.0010004, "$0.001"},
		{0.0019996, "$0.002"},
		{0.01, "$0.01"},
		{0.1, "$0.10"},
		{0.125, "$0.125"},
		{0.99949, "$0.999"},
		{0.995, "$0.995"},
		{1, "$1.00"},
		{1.005, "$1.00"}, // 1.005 is 1.00499… in binary
		{9.999, "$10.00"},
		{1e9, "$1000000000.00"},
	} {
		if got := FormatCost(tc.usd); got != tc.want {
			t.Errorf("FormatCost(%v) = %q, want %q", tc.usd, got, tc.want)
		}
	}
}

// Below a dollar every cost keeps three significant digits: what is shown
// is within half a unit of the third digit of what was spent.
func TestFormatCostKeepsThreeSignificantDigits(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		usd := math.Pow(10, -3+3*r.Float64()) // 0.001 to 1
		got := FormatCost(usd)
		shown, err := strconv.ParseFloat(strings.TrimPrefix(got, "$"), 64)
		if err != nil {
			t.Fatalf("FormatCost(%v) = %q: %v", usd, got, err)
		}
		unit := math.Pow(10, math.Floor(math.Log10(usd))-2)
		if math.Abs(shown-usd) > unit/2*(1+1e-9) && shown != 1 {
			t.Fatalf("FormatCost(%v) = %q, more than half of %g off", usd, got, unit)
		}
		if dot := strings.IndexByte(got, '.'); dot < 0 || len(got)-dot-1 < 2 {
			t.Fatalf("FormatCost(%v) = %q: fewer than two decimals", usd, got)
		}
	}
}
