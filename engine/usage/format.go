package usage

import (
	"math"
	"strconv"
	"strings"
)

// FormatCost is a cost in US dollars the way every view shows one (the
// CLI's tables and the dashboard's formatCost follow the same rule):
//
//   - "—" for a value that is no cost (NaN, infinite or negative);
//   - "$0" for nothing at all;
//   - "<$0.001" for less than a tenth of a cent, which "$0.000" would
//     show as free;
//   - below a dollar, three significant digits with trailing zeros
//     dropped but at least two decimals ("$0.00123", "$0.012", "$0.50");
//   - from a dollar up (after rounding), two decimals ("$1.00",
//     "$1234.50").
//
// Whether a thread has any cost at all is the caller's to show: an
// unpriced total is not "$0".
func FormatCost(usd float64) string {
	switch {
	case math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0:
		return "—"
	case usd == 0:
		return "$0"
	case usd < 0.001:
		return "<$0.001"
	}
	// Rounded to three significant digits first: 0.9996 is $1.00, not
	// $0.1000.
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(usd, 'e', 2, 64), 64)
	if err != nil || rounded >= 1 {
		return "$" + strconv.FormatFloat(usd, 'f', 2, 64)
	}
	s := strconv.FormatFloat(rounded, 'f', -1, 64) // shortest: "0.5", "0.0456"
	if decimals := len(s) - strings.IndexByte(s, '.') - 1; decimals < 2 {
		s += strings.Repeat("0", 2-decimals)
	}
	return "$" + s
}
