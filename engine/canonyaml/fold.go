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
	f := folder[E]{text: text, indent: indent, mode: mode, endStep: endStep}
	if !f.scan(indentAtStart) {
		return text
	}
	if f.overflow && overflowed != nil {
		*overflowed = true
	}
	if len(f.folds) == 0 {
		return text
	}
	return f.apply()
}

// folder is the state of one foldFlowLines: yaml's local variables, with
// -1 for its undefined.
type folder[E unit] struct {
	text    []E
	indent  int
	mode    foldMode
	endStep int

	end              int // the line must fold once the scan reaches this position
	split            int // where the line may break (a space between words), or -1
	prev             int // the character before, or -1
	escStart, escEnd int // the first and last position of the last escape sequence

	folds    []int        // positions of the characters replaced by line breaks
	escaped  map[int]bool // folds that are escaped line breaks (foldQuoted)
	overflow bool         // a line could not be broken
}

// scan finds where the lines break (f.folds). It returns false when a
// quoted line cannot be folded any narrower: the text is then left whole.
func (f *folder[E]) scan(indentAtStart int) bool {
	f.split, f.prev, f.escStart, f.escEnd = -1, -1, -1, -1
	i := f.start(indentAtStart)
	for {
		i++
		ch := at(f.text, i)
		if ch < 0 {
			return true
		}
		if f.mode == foldQuoted && ch == '\\' {
			i = f.skipEscape(i) // ch stays the backslash, as in yaml
		}
		if ch == '\n' {
			if f.mode == foldBlock {
				i = consumeMoreIndentedLines(f.text, i, f.indent)
			}
			f.end = i + f.indent + f.endStep
			f.split = -1
		} else {
			f.noteSplit(i, ch)
			if i >= f.end {
				var ok bool
				if i, ch, ok = f.fold(i, ch); !ok {
					return false
				}
			}
		}
		f.prev = ch
	}
}

// start sets where the first line must fold and returns the position the
// scan goes on after.
func (f *folder[E]) start(indentAtStart int) int {
	f.end = lineWidth - f.indent
	if indentAtStart >= 0 {
		if indentAtStart > lineWidth-max(2, minContentWidth) {
			f.folds = append(f.folds, 0)
		} else {
			f.end = lineWidth - indentAtStart
		}
	}
	i := -1
	if f.mode == foldBlock {
		i = consumeMoreIndentedLines(f.text, i, f.indent)
		if i != -1 {
			f.end = i + f.endStep
		}
	}
	return i
}

// skipEscape notes the escape sequence whose backslash is at i and returns
// the position of its last character.
func (f *folder[E]) skipEscape(i int) int {
	f.escStart = i
	switch at(f.text, i+1) {
	case 'x':
		i += 3
	case 'u':
		i += 5
	case 'U':
		i += 9
	default:
		i++
	}
	f.escEnd = i
	return i
}

// noteSplit notes i as where the line may break if ch, there, is a space
// between two non-space characters.
func (f *folder[E]) noteSplit(i, ch int) {
	if ch == ' ' && f.prev >= 0 && !isFoldSpace(f.prev) {
		if next := at(f.text, i+1); next >= 0 && !isFoldSpace(next) {
			f.split = i
		}
	}
}

func isFoldSpace(ch int) bool { return ch == ' ' || ch == '\n' || ch == '\t' }

// fold breaks the line that reached position i (character ch): at its
// split, or (foldQuoted) with an escaped line break; else the line
// overflows. It returns the position and character the scan goes on from,
// and false when a quoted line cannot be folded any narrower.
func (f *folder[E]) fold(i, ch int) (int, int, bool) {
	switch {
	case f.split > 0:
		f.folds = append(f.folds, f.split)
		f.end = f.split + f.endStep
		f.split = -1
	case f.mode == foldQuoted:
		return f.foldQuoted(i, ch)
	default:
		f.overflow = true
	}
	return i, ch, true
}

// foldQuoted breaks a double-quoted line that has no split with an
// escaped line break.
func (f *folder[E]) foldQuoted(i, ch int) (int, int, bool) {
	// trailing white space may run past the line width
	for f.prev == ' ' || f.prev == '\t' {
		f.prev = ch
		i++
		ch = at(f.text, i)
		f.overflow = true
	}
	// break before the last character, or before an escape sequence
	// rather than inside it
	j := f.escStart - 1
	if i > f.escEnd+1 {
		j = i - 2
	}
	if f.escaped[j] {
		return i, ch, false
	}
	f.folds = append(f.folds, j)
	if f.escaped == nil {
		f.escaped = make(map[int]bool)
	}
	f.escaped[j] = true
	f.end = j + f.endStep
	f.split = -1
	return i, ch, true
}

// apply returns the text with its folds made line breaks.
func (f *folder[E]) apply() []E {
	text, folds := f.text, f.folds
	res := make([]E, 0, len(text)+len(folds)*(f.indent+3))
	res = appendJSSlice(res, text, 0, folds[0])
	for k, fold := range folds {
		stop := len(text)
		if k+1 < len(folds) && folds[k+1] != 0 {
			stop = folds[k+1]
		}
		if fold == 0 {
			res = append(res[:0], '\n')
			res = appendSpaces(res, f.indent)
			res = appendJSSlice(res, text, 0, stop)
			continue
		}
		if f.mode == foldQuoted && f.escaped[fold] {
			res = appendEscapedBreak(res, text, fold)
		}
		res = append(res, '\n')
		res = appendSpaces(res, f.indent)
		res = appendJSSlice(res, text, fold+1, stop)
	}
	return res
}

// appendEscapedBreak appends what precedes an escaped line break at fold:
// the character there, kept, and the backslash.
func appendEscapedBreak[E unit](res, text []E, fold int) []E {
	if c := at(text, fold); c >= 0 {
		res = append(res, E(c))
	} else {
		res = appendASCII(res, "undefined") // as JavaScript would
	}
	return append(res, '\\')
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
