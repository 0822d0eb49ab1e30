package jsrt

import (
	"math"
	"strconv"

	"github.com/dop251/goja"
)

// The asks of join and flat depend on what the receiver holds, not only
// on its length: an array of a thousand references to one large string
// joins to a thousand copies of it. These walks read the items first
// (getters run twice, a price only an array with accessor items pays),
// stop as soon as the total cannot fit, and let the run's kill end them.

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// walkCheck is how often (in items) a walk looks at the run's kill and
// at whether its total still fits.
const walkCheck = 1 << 14

// maxNesting bounds how deep the walks (and so the built-ins after them,
// which recurse on the Go stack) may go into nested arrays and objects.
const maxNesting = maxCallStackSize

// walker carries a walk's bookkeeping.
type walker struct {
	e     *jsEnv
	steps int64
	// joins memoizes the text of nested arrays: shared references are
	// counted every time they are joined, but walked once. -1: being
	// walked (a cycle, which join writes as "").
	joins map[*goja.Object]int64
	flats map[flatKey]int64
}

type flatKey struct {
	o     *goja.Object
	depth float64
}

// step is called per item: it ends a walk the run's kill or an
// unfittable total interrupts.
func (w *walker) step(total int64) bool {
	w.steps++
	if w.steps%walkCheck != 0 {
		return true
	}
	if w.e.loop.killed.Load() {
		panic(w.e.vm.NewGoError(w.e.loop.killedErr()))
	}
	return w.e.loop.acct.Fits(total) == nil
}

func (w *walker) tooDeep() {
	panic(w.e.newErrorOf(w.e.intrinsics.rangeError, "Maximum call stack size exceeded: arrays nested deeper than "+strconv.Itoa(maxNesting)))
}

// joinSize bounds the text join makes of v with a separator of sep
// bytes: the separators and every item's text, a nested array's by the
// same rules (its join runs without JavaScript too); any other object's
// toString is JavaScript the watchdog can interrupt, and counts nothing.
func (e *jsEnv) joinSize(v goja.Value, sep int64, _ int) int64 {
	w := &walker{e: e, joins: map[*goja.Object]int64{}}
	chars, wide := w.join(v, sep, 0)
	if wide {
		return satMul(chars, 2)
	}
	return chars
}

func (w *walker) join(v goja.Value, sep int64, depth int) (chars int64, wide bool) {
	o, ok := v.(*goja.Object)
	if !ok {
		return 0, false
	}
	if depth > maxNesting {
		w.tooDeep()
	}
	if n, seen := w.joins[o]; seen {
		return max(n, 0), false
	}
	w.joins[o] = -1
	l := lengthOf(o)
	total := satMul(max(l-1, 0), sep)
	for i := int64(0); i < l && total < math.MaxInt64; i++ {
		item := o.Get(itoa(i))
		switch {
		case item == nil || goja.IsUndefined(item) || goja.IsNull(item):
		case goja.IsString(item):
			total = satAdd(total, strLen(item))
			wide = wide || charSize(item) == 2
		case isObject(item):
			if w.e.isArray(item) {
				n, wd := w.join(item, 1, depth+1)
				total = satAdd(total, n)
				wide = wide || wd
			}
		default:
			total = satAdd(total, 24)
		}
		if !w.step(total) {
			break
		}
	}
	w.joins[o] = total
	return total, wide
}

func isObject(v goja.Value) bool {
	_, ok := v.(*goja.Object)
	return ok
}

// flatLength is how many items flat(depth) makes of v: every item, and
// the items of nested arrays down to depth. An array nested in itself
// down to a depth it would be flattened at is infinite.
func (e *jsEnv) flatLength(v goja.Value, depth float64) int64 {
	w := &walker{e: e, flats: map[flatKey]int64{}}
	return w.flat(v, depth, 0)
}

func (w *walker) flat(v goja.Value, depth float64, nesting int) int64 {
	o, ok := v.(*goja.Object)
	if !ok {
		return 0
	}
	l := lengthOf(o)
	if depth != depth || depth < 1 {
		return l
	}
	if nesting > maxNesting {
		w.tooDeep()
	}
	k := flatKey{o, depth}
	if n, seen := w.flats[k]; seen {
		if n < 0 {
			return math.MaxInt64 // o contains itself
		}
		return n
	}
	w.flats[k] = -1
	total := int64(0)
	for i := int64(0); i < l && total < math.MaxInt64; i++ {
		item := o.Get(itoa(i))
		if isObject(item) && w.e.isArray(item) {
			total = satAdd(total, w.flat(item, depth-1, nesting+1))
		} else {
			total = satAdd(total, 1)
		}
		if !w.step(satMul(total, valueSize)) {
			break
		}
	}
	w.flats[k] = total
	return total
}
