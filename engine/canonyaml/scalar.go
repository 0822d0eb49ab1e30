package canonyaml

// String scalars are rendered on slices of UTF-16 code units so that every
// index and length matches the JavaScript original. ASCII strings, by far
// the common case, use a []uint8 instantiation of the same code: for them
// bytes and code units coincide.

// unit is a UTF-16 code unit, or a byte of an all-ASCII string.
type unit interface{ uint8 | uint16 }

// Options of yaml's stringify context that this package fixes.
const (
	indentStep        = 2  // {indent: 2}
	lineWidth         = 80 // lineWidth
	minContentWidth   = 20 // minContentWidth
	minMultiLineLen   = 40 // doubleQuotedMinMultiLineLength
	maxImplicitKeyLen = 1024
)

// scalarCtx is the part of yaml's stringify context a string depends on.
type scalarCtx struct {
	indent           int // width of the indentation of continuation lines
	indentAtStart    int // column the scalar starts at, or -1 if unknown
	implicitKey      bool
	forceBlockIndent bool
	doubleQuoted     bool // defaultStringType QUOTE_DOUBLE
}

func appendSpaces[E unit](dst []E, n int) []E {
	for ; n > 0; n-- {
		dst = append(dst, ' ')
	}
	return dst
}

func indexUnit[E unit](s []E, c E) int {
	for i, x := range s {
		if x == c {
			return i
		}
	}
	return -1
}

// at is s[i] as an int, or -1 (JavaScript's undefined) out of range.
func at[E unit](s []E, i int) int {
	if i < 0 || i >= len(s) {
		return -1
	}
	return int(s[i])
}

// isLineTerminator reports the characters JavaScript regular expressions
// treat as line ends (for ^ and $ in multiline mode, and for ".").
func isLineTerminator(c int) bool {
	return c == '\n' || c == '\r' || c == 0x2028 || c == 0x2029
}

// forcesDoubleQuotes reports control characters that only a double-quoted
// scalar can carry: [\x00-\x08\x0b-\x1f\x7f-\x9f].
func forcesDoubleQuotes[E unit](s []E) bool {
	for _, c := range s {
		if c <= 0x08 || (c >= 0x0b && c <= 0x1f) || (c >= 0x7f && c <= 0x9f) {
			return true
		}
	}
	return false
}

// containsDocumentMarker reports a line starting with "%", "---" or "...".
func containsDocumentMarker[E unit](s []E) bool {
	for p := 0; p < len(s); p++ {
		if p > 0 && !isLineTerminator(int(s[p-1])) {
			continue
		}
		switch s[p] {
		case '%':
			return true
		case '-', '.':
			if p+2 < len(s) && s[p+1] == s[p] && s[p+2] == s[p] {
				return true
			}
		}
	}
	return false
}

func stringifyString[E unit](s []E, c *scalarCtx) []E {
	if c.doubleQuoted || forcesDoubleQuotes(s) {
		return doubleQuotedString(s, c)
	}
	return plainString(s, c)
}

// plainIndicator reports whether s cannot be a plain scalar as it stands:
// it starts with an indicator, is "-" or "?", starts with "- " or "? ",
// contains ": ", "\n ", " \n", " #", or ends in whitespace or ":".
func plainIndicator[E unit](s []E) bool {
	n := len(s)
	if n == 0 {
		return false
	}
	switch s[0] {
	case '\n', '\t', ' ', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return true
	case '?', '-':
		if n == 1 || s[1] == ' ' || s[1] == '\t' {
			return true
		}
	}
	for i := 0; i+1 < n; i++ {
		a, b := s[i], s[i+1]
		if a > ':' || !pairStart[a] {
			continue
		}
		switch {
		case (a == '\n' || a == ':') && (b == ' ' || b == '\t'):
			return true
		case (a == ' ' || a == '\t') && b == '\n':
			return true
		case (a == '\n' || a == '\t' || a == ' ') && b == '#':
			return true
		}
	}
	switch s[n-1] {
	case '\n', '\t', ' ', ':':
		return true
	}
	return false
}

// pairStart marks the characters that can start a forbidden pair in
// plainIndicator.
var pairStart = [':' + 1]bool{'\n': true, '\t': true, ' ': true, ':': true}

func plainString[E unit](s []E, c *scalarCtx) []E {
	hasNewline := indexUnit(s, '\n') >= 0
	if c.implicitKey && hasNewline {
		return quotedString(s, c)
	}
	if plainIndicator(s) {
		if c.implicitKey || !hasNewline {
			return quotedString(s, c)
		}
		return blockString(s, c)
	}
	if !c.implicitKey && hasNewline {
		return blockString(s, c)
	}
	if containsDocumentMarker(s) {
		if c.indent == 0 {
			c.forceBlockIndent = true
			return blockString(s, c)
		}
		if c.implicitKey && c.indent == indentStep {
			return quotedString(s, c)
		}
	}
	// s has no newline here.
	if resolvesAsNonString(s) {
		return quotedString(s, c)
	}
	if c.implicitKey {
		return s
	}
	return foldFlowLines(s, c.indent, foldFlow, c.indentAtStart, nil)
}

func quotedString[E unit](s []E, c *scalarCtx) []E {
	if indexUnit(s, '"') >= 0 && indexUnit(s, '\'') < 0 {
		return singleQuotedString(s, c)
	}
	return doubleQuotedString(s, c)
}

// whitespaceAroundNewline matches /[ \t]\n|\n[ \t]/.
func whitespaceAroundNewline[E unit](s []E) bool {
	for i := 0; i+1 < len(s); i++ {
		a, b := s[i], s[i+1]
		if (a == ' ' || a == '\t') && b == '\n' || a == '\n' && (b == ' ' || b == '\t') {
			return true
		}
	}
	return false
}

func singleQuotedString[E unit](s []E, c *scalarCtx) []E {
	if (c.implicitKey && indexUnit(s, '\n') >= 0) || whitespaceAroundNewline(s) {
		return doubleQuotedString(s, c)
	}
	indent := c.indent
	if indent == 0 && containsDocumentMarker(s) {
		indent = indentStep
	}
	res := make([]E, 0, len(s)+8)
	res = append(res, '\'')
	for i := 0; i < len(s); {
		switch s[i] {
		case '\'':
			res = append(res, '\'', '\'')
			i++
		case '\n':
			j := i
			for j < len(s) && s[j] == '\n' {
				j++
			}
			res = append(res, s[i:j]...)
			res = append(res, '\n')
			res = appendSpaces(res, indent)
			i = j
		default:
			res = append(res, s[i])
			i++
		}
	}
	res = append(res, '\'')
	if c.implicitKey {
		return res
	}
	return foldFlowLines(res, indent, foldFlow, c.indentAtStart, nil)
}

const hexDigits = "0123456789abcdef"

// appendJSONQuoted appends JSON.stringify(s).
func appendJSONQuoted[E unit](dst []E, s []E) []E {
	dst = append(dst, '"')
	for _, c := range s {
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', E(hexDigits[c>>4]), E(hexDigits[c&0xF]))
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}

func doubleQuotedString[E unit](s []E, c *scalarCtx) []E {
	json := appendJSONQuoted(make([]E, 0, len(s)+8), s)
	indent := c.indent
	if indent == 0 && containsDocumentMarker(s) {
		indent = indentStep
	}
	var str []E
	start := 0
	for i := 0; i < len(json); i++ {
		ch := json[i]
		if ch == ' ' && at(json, i+1) == '\\' && at(json, i+2) == 'n' {
			// a space before a line break is escaped so folding keeps it
			str = append(str, json[start:i]...)
			str = append(str, '\\', ' ')
			i++
			start = i
			ch = '\\'
		}
		if ch != '\\' {
			continue
		}
		switch at(json, i+1) {
		case 'u':
			str = append(str, json[start:i]...)
			code := json[i+2 : i+6]
			str = appendYAMLEscape(str, code, json[i:i+6])
			i += 5
			start = i + 1
		case 'n':
			if c.implicitKey || at(json, i+2) == '"' || len(json) < minMultiLineLen {
				i++
				break
			}
			// a literal line break (doubled, as folding eats one) instead
			// of the escape
			str = append(str, json[start:i]...)
			str = append(str, '\n', '\n')
			for at(json, i+2) == '\\' && at(json, i+3) == 'n' && at(json, i+4) != '"' {
				str = append(str, '\n')
				i += 2
			}
			str = appendSpaces(str, indent)
			if at(json, i+2) == ' ' {
				str = append(str, '\\')
			}
			i++
			start = i + 1
		default:
			i++
		}
	}
	if start != 0 {
		str = append(str, json[start:]...)
	} else {
		str = json
	}
	if c.implicitKey {
		return str
	}
	return foldFlowLines(str, indent, foldQuoted, c.indentAtStart, nil)
}

// appendYAMLEscape rewrites the JSON escape \uXXXX (code holds the four
// lowercase hex digits, esc the whole escape) in yaml's preferred form.
func appendYAMLEscape[E unit](dst, code, esc []E) []E {
	v := 0
	for _, c := range code {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= int(c - '0')
		case c >= 'a' && c <= 'f':
			v |= int(c-'a') + 10
		}
	}
	var named E
	switch v {
	case 0x00:
		named = '0'
	case 0x07:
		named = 'a'
	case 0x0b:
		named = 'v'
	case 0x1b:
		named = 'e'
	case 0x85:
		named = 'N'
	case 0xa0:
		named = '_'
	case 0x2028:
		named = 'L'
	case 0x2029:
		named = 'P'
	}
	if named != 0 {
		return append(dst, '\\', named)
	}
	if v < 0x100 {
		return append(dst, '\\', 'x', code[2], code[3])
	}
	return append(dst, esc...)
}

// endsInNewlineWhitespace matches /\n[\t ]+$/.
func endsInNewlineWhitespace[E unit](s []E) bool {
	i := len(s)
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	return i < len(s) && i > 0 && s[i-1] == '\n'
}

// lineLengthOverLimit reports whether some line of s is too long for a
// literal block scalar.
func lineLengthOverLimit[E unit](s []E, indentLength int) bool {
	limit := lineWidth - indentLength
	n := len(s)
	if n <= limit {
		return false
	}
	start := 0
	for i := 0; i < n; i++ {
		if s[i] == '\n' {
			if i-start > limit {
				return true
			}
			start = i + 1
			if n-start <= limit {
				return false
			}
		}
	}
	return true
}

// appendIndentedNewlineRuns appends s with indent spaces after every run of
// line breaks (s.replace(/\n+/g, "$&" + indent)).
func appendIndentedNewlineRuns[E unit](dst, s []E, indent int) []E {
	return appendNewlineRuns(dst, s, indent, true)
}

// appendBlockEnd appends the trailing whitespace of a block scalar with
// indent spaces after every run of line breaks that is not at the very end.
func appendBlockEnd[E unit](dst, s []E, indent int) []E {
	return appendNewlineRuns(dst, s, indent, false)
}

// appendNewlineRuns appends s, putting indent spaces after each run of line
// breaks — after a run that ends s only when indentAtEnd.
func appendNewlineRuns[E unit](dst, s []E, indent int, indentAtEnd bool) []E {
	for i := 0; i < len(s); {
		if s[i] != '\n' {
			dst = append(dst, s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '\n' {
			j++
		}
		dst = append(dst, s[i:j]...)
		if indentAtEnd || j < len(s) {
			dst = appendSpaces(dst, indent)
		}
		i = j
	}
	return dst
}

func blockString[E unit](s []E, c *scalarCtx) []E {
	if endsInNewlineWhitespace(s) {
		return quotedString(s, c)
	}
	indent := c.indent
	if indent == 0 && (c.forceBlockIndent || containsDocumentMarker(s)) {
		indent = indentStep
	}
	literal := !lineLengthOverLimit(s, indent)
	if len(s) == 0 {
		if literal {
			return []E{'|', '\n'}
		}
		return []E{'>', '\n'}
	}

	// Chomping follows the trailing whitespace.
	endStart := len(s)
	for endStart > 0 {
		ch := s[endStart-1]
		if ch != '\n' && ch != '\t' && ch != ' ' {
			break
		}
		endStart--
	}
	end := s[endStart:]
	var chomp E
	if nl := indexUnit(end, '\n'); nl == -1 {
		chomp = '-'
	} else if endStart == 0 || nl != len(end)-1 {
		chomp = '+'
	}
	value := s[:endStart]
	if len(end) > 0 && end[len(end)-1] == '\n' {
		end = end[:len(end)-1]
	}

	// Leading spaces require an indentation indicator; leading line breaks
	// are kept apart from the folded body.
	startWithSpace := false
	startNl := -1
	for i := 0; i < len(value); i++ {
		if value[i] == ' ' {
			startWithSpace = true
		} else if value[i] == '\n' {
			startNl = i
		} else {
			break
		}
	}
	lead := value[:startNl+1]
	value = value[startNl+1:]

	header := make([]E, 0, 8)
	header = append(header, '|')
	if startWithSpace {
		if indent != 0 {
			header = append(header, '2')
		} else {
			header = append(header, '1')
		}
	}
	if chomp != 0 {
		header = append(header, chomp)
	}
	header = append(header, '\n')
	header = appendSpaces(header, indent)

	if !literal {
		text := make([]E, 0, len(s)+len(s)/8+16)
		text = appendIndentedNewlineRuns(text, lead, indent)
		text = appendFoldedBody(text, value, indent)
		text = appendBlockEnd(text, end, indent)
		overflow := false
		body := foldFlowLines(text, indent, foldBlock, c.indent, &overflow)
		if !overflow {
			header[0] = '>'
			return append(header, body...)
		}
	}
	out := header
	out = appendIndentedNewlineRuns(out, lead, indent)
	out = appendIndentedNewlineRuns(out, value, indent)
	return appendBlockEnd(out, end, indent)
}

// appendFoldedBody prepares the body of a folded block scalar: every run of
// line breaks gets one more (folding turns a single break into a space),
// except around more-indented lines, which are not folded; then every run of
// breaks is followed by the indentation.
func appendFoldedBody[E unit](dst, value []E, indent int) []E {
	// value.replace(/\n+/g, "\n$&")
	doubled := make([]E, 0, len(value)+8)
	for i := 0; i < len(value); {
		if value[i] != '\n' {
			doubled = append(doubled, value[i])
			i++
			continue
		}
		j := i
		for j < len(value) && value[j] == '\n' {
			j++
		}
		doubled = append(doubled, '\n')
		doubled = append(doubled, value[i:j]...)
		i = j
	}
	// .replace(/(?:^|\n)([\t ].*)(?:([\n\t ]*)\n(?![\n\t ]))?/g, "$1$2")
	s := doubled
	unindented := make([]E, 0, len(s))
	last := 0
	for p := 0; p < len(s); {
		var g1 int
		switch {
		case p == 0 && (s[0] == ' ' || s[0] == '\t'):
			g1 = 0
		case s[p] == '\n' && p+1 < len(s) && (s[p+1] == ' ' || s[p+1] == '\t'):
			g1 = p + 1
		default:
			p++
			continue
		}
		q := g1 + 1
		for q < len(s) && !isLineTerminator(int(s[q])) {
			q++
		}
		r := q
		for r < len(s) && (s[r] == '\n' || s[r] == '\t' || s[r] == ' ') {
			r++
		}
		g2End, matchEnd := q, q
		if r > q && s[r-1] == '\n' {
			g2End, matchEnd = r-1, r
		}
		unindented = append(unindented, s[last:p]...)
		unindented = append(unindented, s[g1:g2End]...)
		last, p = matchEnd, matchEnd
	}
	unindented = append(unindented, s[last:]...)
	// .replace(/\n+/g, "$&" + indent)
	return appendIndentedNewlineRuns(dst, unindented, indent)
}

// resolvesAsNonString reports whether the plain scalar s would be read back
// by the YAML 1.2 core schema as null, a boolean or a number.
func resolvesAsNonString[E unit](s []E) bool {
	n := len(s)
	if n == 0 {
		return true // empty plain scalar is null
	}
	if n == 1 && s[0] == '~' {
		return true
	}
	if n >= 4 && n <= 5 {
		for _, lit := range coreKeywords {
			if equalsASCII(s, lit) {
				return true
			}
		}
	}
	if n > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x') {
		hex := s[1] == 'x'
		ok := true
		for _, c := range s[2:] {
			if !(c >= '0' && c <= '7' || hex && (c >= '8' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return isCoreNumber(s)
}

// coreKeywords are the plain scalars the core schema reads as null, booleans
// or special floats.
var coreKeywords = [...]string{
	"null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE",
	".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF",
	"+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
}

func equalsASCII[E unit](s []E, lit string) bool {
	if len(s) != len(lit) {
		return false
	}
	for i := range s {
		if s[i] != E(lit[i]) {
			return false
		}
	}
	return true
}

// isCoreNumber matches the core schema's int, float and exponential float:
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
func isCoreNumber[E unit](s []E) bool {
	i, n := 0, len(s)
	isDigit := func(i int) bool { return i < n && s[i] >= '0' && s[i] <= '9' }
	if i < n && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if isDigit(i) {
		for isDigit(i) {
			i++
		}
		if i < n && s[i] == '.' {
			i++
			for isDigit(i) {
				i++
			}
		}
	} else if i < n && s[i] == '.' && isDigit(i+1) {
		i++
		for isDigit(i) {
			i++
		}
	} else {
		return false
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if !isDigit(i) {
			return false
		}
		for isDigit(i) {
			i++
		}
	}
	return i == n
}
