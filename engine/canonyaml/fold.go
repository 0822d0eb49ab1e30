package canonyaml

type foldMode int

const (
	foldFlow   foldMode = iota // plain and single-quoted scalars
	foldQuoted                 // double-quoted scalars: may break inside words with "\"
	foldBlock                  // folded block scalars: more-indented lines are kept
)

// foldFlowLines breaks text into lines of at most lineWidth columns where it
// can, starting continuation lines with indent spaces. It breaks at a space
// between two non-space characters, or (foldQuoted) anywhere outside an
// escape sequence by escaping the line break. indentAtStart is the column the
// first line starts at, or -1 when unknown. If some line could not be broken
// and overflowed is not nil, *overflowed is set.
//
// The index arithmetic deliberately mirrors yaml's foldFlowLines, including
// its behaviour when the indentation leaves less room than minContentWidth.
func foldFlowLines[E unit](text []E, indent int, mode foldMode, indentAtStart int, overflowed *bool) []E {
	endStep := max(1+minContentWidth, 1+lineWidth-indent)
	if len(text) <= endStep {
		return text
	}
	var folds []int
	var escaped map[int]bool
	end := lineWidth - indent
	if indentAtStart >= 0 {
		if indentAtStart > lineWidth-max(2, minContentWidth) {
			folds = append(folds, 0)
		} else {
			end = lineWidth - indentAtStart
		}
	}
	split, prev := -1, -1
	overflow := false
	i := -1
	escStart, escEnd := -1, -1
	if mode == foldBlock {
		i = consumeMoreIndentedLines(text, i, indent)
		if i != -1 {
			end = i + endStep
		}
	}
	for {
		i++
		ch := at(text, i)
		if ch < 0 {
			break
		}
		if mode == foldQuoted && ch == '\\' {
			escStart = i
			switch at(text, i+1) {
			case 'x':
				i += 3
			case 'u':
				i += 5
			case 'U':
				i += 9
			default:
				i++
			}
			escEnd = i
		}
		if ch == '\n' {
			if mode == foldBlock {
				i = consumeMoreIndentedLines(text, i, indent)
			}
			end = i + indent + endStep
			split = -1
		} else {
			if ch == ' ' && prev >= 0 && prev != ' ' && prev != '\n' && prev != '\t' {
				// a space between non-spaces can become a line break
				if next := at(text, i+1); next >= 0 && next != ' ' && next != '\n' && next != '\t' {
					split = i
				}
			}
			if i >= end {
				switch {
				case split > 0:
					folds = append(folds, split)
					end = split + endStep
					split = -1
				case mode == foldQuoted:
					// trailing white space may run past the line width
					for prev == ' ' || prev == '\t' {
						prev = ch
						i++
						ch = at(text, i)
						overflow = true
					}
					// break before the last character, or before an escape
					// sequence rather than inside it
					j := escStart - 1
					if i > escEnd+1 {
						j = i - 2
					}
					if escaped[j] {
						return text // cannot fold any narrower
					}
					folds = append(folds, j)
					if escaped == nil {
						escaped = make(map[int]bool)
					}
					escaped[j] = true
					end = j + endStep
					split = -1
				default:
					overflow = true
				}
			}
		}
		prev = ch
	}
	if overflow && overflowed != nil {
		*overflowed = true
	}
	if len(folds) == 0 {
		return text
	}
	res := make([]E, 0, len(text)+len(folds)*(indent+3))
	res = appendJSSlice(res, text, 0, folds[0])
	for k, fold := range folds {
		stop := len(text)
		if k+1 < len(folds) && folds[k+1] != 0 {
			stop = folds[k+1]
		}
		if fold == 0 {
			res = append(res[:0], '\n')
			res = appendSpaces(res, indent)
			res = appendJSSlice(res, text, 0, stop)
			continue
		}
		if mode == foldQuoted && escaped[fold] {
			if c := at(text, fold); c >= 0 {
				res = append(res, E(c))
			} else {
				res = appendASCII(res, "undefined") // as JavaScript would
			}
			res = append(res, '\\')
		}
		res = append(res, '\n')
		res = appendSpaces(res, indent)
		res = appendJSSlice(res, text, fold+1, stop)
	}
	return res
}

func appendASCII[E unit](dst []E, s string) []E {
	for i := 0; i < len(s); i++ {
		dst = append(dst, E(s[i]))
	}
	return dst
}

// appendJSSlice appends text.slice(from, to) with JavaScript's handling of
// negative and out-of-range bounds.
func appendJSSlice[E unit](dst, text []E, from, to int) []E {
	n := len(text)
	clamp := func(x int) int {
		if x < 0 {
			return max(n+x, 0)
		}
		return min(x, n)
	}
	from, to = clamp(from), clamp(to)
	if from >= to {
		return dst
	}
	return append(dst, text[from:to]...)
}

// consumeMoreIndentedLines skips the lines after position i (a line break,
// or -1 at the start) that are indented by more than indent columns, and
// returns the position of the line break ending the last of them (or i).
func consumeMoreIndentedLines[E unit](text []E, i, indent int) int {
	end := i
	start := i + 1
	ch := at(text, start)
	for ch == ' ' || ch == '\t' {
		if i < start+indent {
			i++
			ch = at(text, i)
			continue
		}
		for {
			i++
			ch = at(text, i)
			if ch < 0 || ch == '\n' {
				break
			}
		}
		end = i
		start = i + 1
		ch = at(text, start)
	}
	return end
}
