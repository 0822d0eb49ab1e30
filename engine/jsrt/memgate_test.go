package jsrt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/shared/testkit"
)

// gateBudget is the budget the gate tests give their runtimes.
const gateBudget = 16 << 20

// evalBudgeted runs src, the body of an async function, in a fresh run's
// runtime with budget, as a role's JavaScript runs, and returns what it
// returned (exported) or the error that escaped it, as a run reports it.
// src may require modules, and call __export(v) to export v as a step's
// meta is.
func evalBudgeted(t testing.TB, budget int64, src string) (any, error) {
	t.Helper()
	h := budgetHost{newFakeHost(t), budget}
	e := newEnv(envConfig{host: h, bundleName: "gate.js", budget: budget})
	defer e.close()
	var p *goja.Promise
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := e.loop.runUntil(ctx, func() error {
		_ = e.vm.Set("require", func(name string) goja.Value { return e.requireModule(name) })
		_ = e.vm.Set("__export", func(v goja.Value) int {
			tree, err := e.exportTree(v)
			if err != nil {
				panic(e.refusal(err))
			}
			return len(fmt.Sprint(tree))
		})
		v, err := e.vm.RunScript("gate.js", "(async () => {\n"+src+"\n})()")
		if err != nil {
			return err
		}
		p = v.Export().(*goja.Promise)
		return nil
	}, func() bool { return p != nil && p.State() != goja.PromiseStatePending })
	if err != nil {
		return nil, exceptionError(err, "gate.js")
	}
	if p.State() == goja.PromiseStateRejected {
		return nil, asRefusal(valueError(p.Result(), "gate.js"), p.Result())
	}
	return p.Result().Export(), nil
}

// gateCase is one call a script sizes: body returns something small
// after a call that allocates about n bytes (n is in scope, and B, the
// budget). The test runs it with n four times the budget, where the call
// must throw the budget's RangeError, and with n an eighth of it, where
// it must work.
type gateCase struct {
	name, body string
	// heavy: the call does much work per byte or makes much more
	// garbage than it keeps (a RegExp's match objects); its run under the
	// budget is a quarter the size, to keep the test quick and the
	// garbage a collection still finds live small beside the budget.
	heavy bool
	// gradual: the data comes in pieces (a pipe, an unannounced body,
	// JSON.stringify's text, metered as goja writes it; copies kept one
	// after the other, each below the budget; a RegExp's matches counted
	// one by one to size the result, each a garbage object that a
	// collection under load may not have found yet), so the watchdog may stop
	// the run on what it already holds before the next piece is asked
	// for: either ends the thread naming its budget.
	gradual bool
}

func gateCases(t *testing.T) []gateCase {
	dir := t.TempDir()
	sized := filepath.Join(dir, "sized")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if r.URL.Query().Get("announce") != "" {
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		}
		chunk := make([]byte, 64<<10)
		for sent := int64(0); sent < n; sent += int64(len(chunk)) {
			if _, err := w.Write(chunk[:min(int64(len(chunk)), n-sent)]); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	cases := []gateCase{
		// Typed arrays and ArrayBuffers, however they are made.
		{name: "new ArrayBuffer", body: `return new ArrayBuffer(n).byteLength`},
		{name: "new Uint8Array from an array-like", body: `return new Uint8Array({length: n}).length`, heavy: true},
		{name: "Uint8Array.from an array-like", body: `return Uint8Array.from({length: n / 48}).length`},
		{name: "a subclass of Uint8Array", body: `class Sub extends Uint8Array {}; const b = new Sub(n); return b instanceof Sub && b instanceof Uint8Array && b.length`},
		{name: "Reflect.construct a typed array", body: `return Reflect.construct(Int32Array, [n / 4]).length`},
		{name: "a typed array's constructor", body: `return new (new Uint8Array(1).constructor)(n).length`},
		{name: "typed array slices", body: copies(`new Uint8Array(S)`, `a.slice()`), gradual: true},
		{name: "typed array maps", body: copies(`new Float64Array(S / 8)`, `a.map(Math.abs)`), heavy: true, gradual: true},
		{name: "typed array toReversed", body: copies(`new Float64Array(S / 8)`, `a.toReversed()`), heavy: true, gradual: true},
		{name: "typed array with", body: copies(`new Float64Array(S / 8)`, `a.with(0, 1)`), gradual: true},
		{name: "ArrayBuffer slices", body: copies(`new ArrayBuffer(S)`, `a.slice(0)`), gradual: true},
		{name: "typed array join", body: `return new Uint8Array(n / 4).join("").length`},
		// Buffer.
		{name: "Buffer.alloc", body: `return Buffer.alloc(n).length`},
		{name: "Buffer.alloc with a fill", body: `return Buffer.alloc(n, 7).length`},
		{name: "Buffer.allocUnsafe", body: `return Buffer.allocUnsafe(n).length`},
		{name: "Buffer.allocUnsafeSlow", body: `return Buffer.allocUnsafeSlow(n).length`},
		{name: "Buffer.from an array-like", body: `return Buffer.from({length: n}).length`, heavy: true},
		{name: "new Buffer from an array-like", body: `return new Buffer({length: n}).length`, heavy: true},
		{name: "Buffer.concat told a total", body: `return Buffer.concat([Buffer.alloc(1)], n).length`},
		{name: "Buffer.concat of references", body: `return Buffer.concat(new Array(16).fill(Buffer.alloc(n / 16))).length`},
		{name: "Buffer.from a string as latin1", body: `return Buffer.from("x".repeat(n / 7), "latin1").length`},
		{name: "Buffer toString latin1", body: `return Buffer.alloc(n / 8).toString("latin1").length`},
		{name: "Buffer.byteLength latin1", body: `return Buffer.byteLength("x".repeat(n / 7), "latin1")`},
		{name: "btoa", body: `return btoa("x".repeat(n / 6)).length`},
		{name: "atob", body: `return atob("QUJD".repeat(n / 40)).length`},
		// TextEncoder and TextDecoder.
		{name: "TextEncoder.encode", body: `return new TextEncoder().encode("é".repeat(n / 12)).length`},
		{name: "TextDecoder.decode", body: `return new TextDecoder().decode(new Uint8Array(n / 5).fill(255)).length`},
		// Strings.
		{name: "repeat", body: `return "x".repeat(n).length`},
		{name: "repeat of UTF-16", body: `return "é".repeat(n / 2).length`},
		{name: "repeat with a count object", body: `return "x".repeat({valueOf: () => n}).length`},
		{name: "repeat of an object's text", body: `return String.prototype.repeat.call({toString: () => "x"}, n).length`},
		{name: "padStart", body: `return "x".padStart(n).length`},
		{name: "padEnd with UTF-16", body: `return "x".padEnd(n / 2, "é").length`},
		{name: "concat of references", body: `return "".concat(...new Array(16).fill("x".repeat(n / 32))).length`},
		{name: "join of holes", body: `return new Array(n / 2).join("ab").length`, heavy: true},
		{name: "join of references", body: `return new Array(16).fill("x".repeat(n / 16)).join("").length`},
		{name: "join of nested references", body: `return [new Array(16).fill("x".repeat(n / 16))].join().length`},
		{name: "String of an array", body: `return String(new Array(n)).length`, heavy: true},
		{name: "toLocaleString of references", body: `return new Array(16).fill("x".repeat(n / 16)).toLocaleString().length`},
		{name: "String.raw", body: `return String.raw({raw: {length: n / 18}}).length`},
		{name: "split by a string", body: `return "x".repeat(n / 48).split("").length`},
		{name: "split by a RegExp", body: `return "x".repeat(n / 48).split(/(?:)/).length`, heavy: true, gradual: true},
		{name: "match all", body: `return "x".repeat(n / 48).match(/x/g).length`, heavy: true, gradual: true},
		{name: "replaceAll", body: `return "x".repeat(n / 34).replaceAll("x", "y".repeat(16)).length`},
		{name: "replace with a global RegExp", body: `return "x".repeat(n / 34).replace(/x/g, "y".repeat(16)).length`, heavy: true, gradual: true},
		{name: "replaceAll inserting the rest", body: `return "x".repeat(Math.sqrt(n / 2)).replaceAll("x", "$'").length`},
		// JSON.
		{name: "JSON.stringify of holes", body: `return JSON.stringify(new Array(Math.floor(n / 5))).length`, heavy: true, gradual: true},
		{name: "JSON.stringify of references", body: `return JSON.stringify(new Array(16).fill("x".repeat(n / 48))).length`, heavy: true, gradual: true},
		{name: "JSON.stringify of object references", body: `const s = "x".repeat(n / 48); return JSON.stringify(Object.fromEntries(Array.from({length: 16}, (_, i) => ["k" + i, s]))).length`, gradual: true},
		{name: "JSON.stringify with a replacer array", body: `return JSON.stringify(new Array(16).fill({a: "x".repeat(n / 48), b: 1}), ["a"]).length`, heavy: true, gradual: true},
		{name: "JSON.stringify with a replacer function", body: `return JSON.stringify(new Array(16).fill("x".repeat(n / 48)), (k, v) => v).length`, heavy: true, gradual: true},
		{name: "JSON.stringify indented", body: `return JSON.stringify(new Array(16).fill("x".repeat(n / 48)), null, 2).length`, heavy: true, gradual: true},
		{name: "JSON.parse", body: `return JSON.parse("[" + "0,".repeat(n / 48) + "0]").length`},
		// Arrays.
		{name: "Array.from an array-like", body: `return Array.from({length: n / 48}).length`},
		{name: "Array.from a typed array", body: `return Array.from(new Uint8Array(n / 48)).length`},
		{name: "Array fill", body: `return new Array(n / 16).fill(0).length`},
		{name: "fill of an array-like", body: `return Array.prototype.fill.call({length: n / 192}, 0).length`},
		{name: "Array map", body: `return new Array(n / 16).map((x) => x).length`},
		{name: "Array toReversed", body: `return new Array(n / 16).toReversed().length`},
		{name: "Array toSorted", body: `return new Array(n / 16).toSorted().length`},
		{name: "Array with", body: `return new Array(n / 16).with(0, 1).length`},
		{name: "Array toSpliced", body: `return new Array(n / 16).toSpliced(0, 0, 1).length`},
		{name: "Array slice", body: `return new Array(n / 16).slice().length`},
		{name: "Array sort", body: `return new Array(n / 16).sort().length`},
		{name: "Array splice", body: `const a = new Array(n / 16); a.splice(0, 0, 1); return a.length`},
		{name: "Array unshift", body: `return new Array(n / 16).unshift(1)`},
		{name: "Array concat", body: `return [].concat(new Array(n / 16)).length`},
		{name: "Array flat of references", body: `return new Array(16).fill(new Array(n / 256).fill(0)).flat().length`, heavy: true},
		{name: "apply with an array-like", body: `return Math.max.apply(null, {length: n / 16})`},
		{name: "Reflect.apply", body: `return Reflect.apply(Math.max, null, {length: n / 16})`},
		{name: "Reflect.construct with an array-like", body: `return Reflect.construct(Array, {length: n / 16}).length`},
		{name: "Object.keys of a typed array", body: `return Object.keys(new Uint8Array(n / 192)).length`},
		{name: "Object.entries of a string", body: `return Object.entries("x".repeat(n / 192)).length`},
		{name: "Object.assign of a string", body: `return Object.keys(Object.assign({}, "x".repeat(n / 192))).length`},
		{name: "Reflect.ownKeys of a typed array", body: `return Reflect.ownKeys(new Uint8Array(n / 192)).length`},
		{name: "BigInt.asUintN", body: `return BigInt.asUintN(8 * n, -1n) > 0n`},
		// What the host exports: a step's meta.
		{name: "meta of holes", body: `return __export({a: new Array(n / 16)})`},
		{name: "meta of references", body: `return __export({a: new Array(16).fill("x".repeat(n / 16))})`},
		// Data the host reads whole.
		{name: "readFileSync", body: fmt.Sprintf(`return require("fs").readFileSync(%q + n).length`, sized)},
		{name: "fs.promises.readFile", body: fmt.Sprintf(`return (await require("fs").promises.readFile(%q + n)).length`, sized)},
		{name: "fetch of an unannounced body", body: fmt.Sprintf(`return (await (await fetch(%q + n)).arrayBuffer()).byteLength`, srv.URL+"/?n="), gradual: true},
		{name: "fetch of an announced body", body: fmt.Sprintf(`return (await (await fetch(%q + n)).text()).length`, srv.URL+"/?announce=1&n=")},
		{name: "execSync without maxBuffer", body: `return require("child_process").execSync("head -c " + n + " /dev/zero", {maxBuffer: Infinity}).length`, gradual: true},
		{name: "spawnSync without maxBuffer", body: `const r = require("child_process").spawnSync("head", ["-c", String(n), "/dev/zero"], {maxBuffer: Infinity}); if (r.error) throw r.error; return r.stdout.length`, gradual: true},
		{name: "exec without maxBuffer", body: `const {stdout} = await require("util").promisify(require("child_process").exec)("head -c " + n + " /dev/zero", {maxBuffer: Infinity, encoding: "buffer"}); return stdout.length`, gradual: true},
	}
	for _, ta := range typedArrays {
		cases = append(cases, gateCase{name: "new " + ta.name, body: fmt.Sprintf(`return new %s(n / %d).length`, ta.name, ta.size)})
	}
	// The files readFileSync reads: sparse, of the sizes the two runs ask.
	for _, n := range []int64{4 * gateBudget, gateBudget / 8} {
		f, err := os.Create(sized + strconv.FormatInt(n, 10))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(n); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	return cases
}

// copies is a body that keeps copies of a source of S bytes (35% of the
// budget), n/S of them (at least one): the second would take the thread
// past its budget and is refused while it holds 70% of it.
func copies(src, op string) string {
	return fmt.Sprintf(`const S = Math.floor(B * 0.35 / 8) * 8; const a = %s; const keep = []; for (let i = 0; i < Math.max(n / S, 1); i++) keep.push(%s); return keep.length`, src, op)
}

// TestEveryCallAScriptSizesIsHeldToTheBudget: each way a script can size
// one allocation — a number it passes, the length of what it holds,
// references repeated, data the host reads for it — throws the budget's
// RangeError before allocating four times the budget, and works at an
// eighth of it. The thrown error names the budget and how to raise it;
// uncaught, it fails the run with errors.Is(err, membudget.ErrExceeded).
func TestEveryCallAScriptSizesIsHeldToTheBudget(t *testing.T) {
	// Serial: the watchdog's books are the process's.
	for _, c := range gateCases(t) {
		t.Run(c.name, func(t *testing.T) {
			for _, over := range []bool{true, false} {
				n := int64(gateBudget / 8)
				switch {
				case over:
					n = 4 * gateBudget
				case c.heavy:
					n /= 4
				}
				src := fmt.Sprintf("const B = %d, n = %d;\n%s", gateBudget, n, c.body)
				got, err := evalBudgeted(t, gateBudget, src)
				if !over {
					if err != nil {
						t.Fatalf("n = %d (an eighth of the budget): %v", n, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("n = %d (four times the budget) returned %v", n, got)
				}
				if !errors.Is(err, membudget.ErrExceeded) {
					t.Fatalf("n = %d: %v, not the budget's refusal", n, err)
				}
				want := []string{"RangeError: memory budget exceeded", "budget of 16MiB", "memoryBudget: ", "--memory-budget "}
				if c.gradual && !strings.HasPrefix(err.Error(), "RangeError") {
					want = []string{"memory budget exceeded", "budget of 16MiB", "memoryBudget: ", "--memory-budget "}
				}
				for _, want := range want {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q lacks %q", err, want)
					}
				}
			}
		})
	}
}

// TestARefusedCallCanBeCaughtAndAllocatedNothing: the refusal is a
// RangeError with code ERR_MEMORY_BUDGET that a script can catch and
// carry on from; nothing was allocated, so the thread is not charged.
func TestARefusedCallCanBeCaughtAndAllocatedNothing(t *testing.T) {
	got, err := evalBudgeted(t, gateBudget, `
const caught = [];
for (let i = 0; i < 100; i++) {
  try { new Uint8Array(4 * `+strconv.Itoa(gateBudget)+`); } catch (e) { caught.push(e instanceof RangeError && e.code); }
}
return caught.every((c) => c === "ERR_MEMORY_BUDGET") && new Uint8Array(1 << 20).length`)
	if err != nil || got != int64(1<<20) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestAGatedConstructorIsTheOneScriptsKnow: the wrapped constructors keep
// what scripts and libraries rely on: instanceof, the prototype's
// constructor, species, statics, subclassing and Buffer's identity.
func TestAGatedConstructorIsTheOneScriptsKnow(t *testing.T) {
	got, err := evalBudgeted(t, gateBudget, `
const checks = {
  instanceof: new Uint8Array(2) instanceof Uint8Array && new ArrayBuffer(2) instanceof ArrayBuffer,
  constructor: new Float64Array(1).constructor === Float64Array && Uint8Array.prototype.constructor === Uint8Array,
  species: new Uint8Array(4).slice(1) instanceof Uint8Array && new ArrayBuffer(4).slice(1) instanceof ArrayBuffer,
  statics: Uint8Array.BYTES_PER_ELEMENT === 1 && Float64Array.BYTES_PER_ELEMENT === 8 && typeof ArrayBuffer.isView === "function" && typeof Uint8Array.from === "function",
  speciesGetter: ArrayBuffer[Symbol.species] === ArrayBuffer && Uint8Array[Symbol.species] === Uint8Array,
  name: Uint8Array.name === "Uint8Array" && Uint8Array.length === 3 && "x".repeat.name === "repeat" && JSON.stringify.length === 3,
  subclass: (() => { class B extends Uint8Array { sum() { return this.reduce((a, b) => a + b, 0); } } const b = new B([1, 2, 3]); return b.sum() === 6 && b instanceof B && b.slice(1) instanceof B; })(),
  buffer: Buffer.from("hi") instanceof Uint8Array && Buffer.isBuffer(Buffer.alloc(1)) && Buffer.from("aGk=", "base64").toString() === "hi" && Buffer.concat([Buffer.from("a"), Buffer.from("b")]).toString() === "ab",
  bufferSubclass: Object.getPrototypeOf(Buffer) === Uint8Array,
  view: new Uint8Array(new ArrayBuffer(8), 2, 4).length === 4 && new DataView(new ArrayBuffer(4)).byteLength === 4,
  fromIterable: new Uint8Array(new Set([1, 2])).length === 2 && Array.from(new Map([[1, 2]])).length === 1,
  json: JSON.stringify({b: 1, a: [1, "x", null, undefined, () => 1], c: {toJSON() { return "j"; }}}, null, 1) === '{\n "b": 1,\n "a": [\n  1,\n  "x",\n  null,\n  null,\n  null\n ],\n "c": "j"\n}',
  jsonList: JSON.stringify({b: 1, a: 2, c: {a: 3, d: 4}}, ["a", "c"]) === '{"a":2,"c":{"a":3}}',
  jsonReplacer: JSON.stringify({a: 1, b: "x"}, (k, v) => (typeof v === "number" ? v + 1 : v)) === '{"a":2,"b":"x"}',
  strings: "ab".repeat(2) === "abab" && "x".padStart(3, "ab") === "abx" && "a,b".split(",").length === 2 && "aXbX".replaceAll("X", "$&$&") === "aXXbXX" && "a-b".replace(/-/g, "+") === "a+b",
  join: [1, [2, [3]], null, "x"].join(";") === "1;2,3;;x" && (() => { const c = [1]; c.push(c); return c.join(); })() === "1,",
  flat: [1, [2, [3, [4]]]].flat(Infinity).length === 4,
  apply: Math.max.apply(null, [1, 5, 3]) === 5,
};
return Object.entries(checks).filter(([, ok]) => !ok).map(([k]) => k).join(",")`)
	if err != nil || got != "" {
		t.Fatalf("broken: %q, %v", got, err)
	}
}

// gateHelperEnv carries the call TestGateHelperProcess runs.
const gateHelperEnv = "JSRT_GATE_CALL"

// TestGateHelperProcess is not a test of its own: TestTheIssuesCalls...
// runs the test binary again with it, to make one call in a process of
// its own that may die or grow without taking the tests along.
func TestGateHelperProcess(t *testing.T) {
	src := os.Getenv(gateHelperEnv)
	if src == "" {
		// Not a skip: make test counts skipped tests as missing tools,
		// and nothing is missing here. The real run is the subprocess's.
		return
	}
	// An endless body, announced as 3 GB or not announced at all.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("announce") != "" {
			w.Header().Set("Content-Length", "3000000000")
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, err := evalBudgeted(t, helperBudget, strings.ReplaceAll(src, "$URL", srv.URL))
	fmt.Printf("\nGATE-RESULT %v\n", err)
}

// helperBudget is the budget of the helper process's runtime.
const helperBudget = 64 << 20

// TestTheIssuesCallsFailAloneInAProcessOfTheirOwn runs the issue's
// reproductions, and what else makes one call allocate without bound or
// recurse without end, each in a process of its own watched from here:
// the call must fail naming the budget, and the process must live and
// stay small. Before the gates each of these ended its process (runtime:
// out of memory, or a goroutine stack over its limit) or grew it by
// gigabytes.
func TestTheIssuesCallsFailAloneInAProcessOfTheirOwn(t *testing.T) {
	calls := []struct{ name, src string }{
		{"new Uint8Array(1e11)", `new Uint8Array(1e11)`},
		{"new Uint8Array(2e9)", `new Uint8Array(2e9)`},
		{"new ArrayBuffer(1e11)", `new ArrayBuffer(1e11)`},
		{"readFileSync of /dev/zero", `require("fs").readFileSync("/dev/zero")`},
		{"readFile of /dev/zero", `await require("fs").promises.readFile("/dev/zero")`},
		{"fetch of a 3 GB body", `await (await fetch("$URL/?announce=1")).arrayBuffer()`},
		{"fetch of an endless body", `await (await fetch("$URL/")).text()`},
		{"execSync of an endless output", `require("child_process").execSync("cat /dev/zero", {maxBuffer: Infinity})`},
		{"repeat(3e9)", `"x".repeat(3e9)`},
		{"padStart(3e9)", `"x".padStart(3e9)`},
		{"join of 2^32-1 holes", `new Array(2 ** 32 - 1).join("ab")`},
		{"JSON.stringify of 2^30 holes", `JSON.stringify(new Array(2 ** 30))`},
		{"apply of 1e9 arguments", `Math.max.apply(null, {length: 1e9})`},
		{"Array(1e9).fill", `new Array(1e9).fill(0)`},
		{"Array.from({length: 1e9})", `Array.from({length: 1e9})`},
		{"toReversed of 2^32-1 holes", `new Array(2 ** 32 - 1).toReversed()`},
		{"map of 2^32-1 holes", `new Array(2 ** 32 - 1).map((x) => x)`},
		{"flat(Infinity) of an array in itself", `const a = [1]; a.push(a); a.flat(Infinity)`},
		{"spread of 1e9 holes", `[...new Array(1e9)]`},
		{"Set of 1e9 keys", `new Set(new Array(1e9).keys())`},
		{"Array.from 1e9 keys", `Array.from(new Array(1e9).keys())`},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			out := runGateHelper(t, c.src, 1<<30)
			if !strings.Contains(out, "GATE-RESULT ") {
				t.Fatalf("the process did not finish the call:\n%s", out)
			}
			res := out[strings.Index(out, "GATE-RESULT ")+len("GATE-RESULT "):]
			res = res[:strings.IndexByte(res+"\n", '\n')]
			if !strings.Contains(res, "memory budget exceeded") && !strings.Contains(res, "Maximum call stack size exceeded") {
				t.Fatalf("the call did not fail on the budget: %s", res)
			}
			if strings.Contains(res, "memory budget exceeded") && !strings.Contains(res, "64MiB") {
				t.Fatalf("the failure does not name the budget: %s", res)
			}
		})
	}
}

// runGateHelper runs src in TestGateHelperProcess and returns its output;
// it fails the test if the process dies or its resident memory passes
// maxRSS (then it is killed).
func runGateHelper(t *testing.T, src string, maxRSS int64) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGateHelperProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), gateHelperEnv+"="+src)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	peak := int64(0)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the process failed (%v), peak RSS %d MiB:\n%s", err, peak>>20, tail(out.String()))
			}
			return out.String()
		case <-time.After(5 * time.Millisecond):
		}
		if rss := processRSS(cmd.Process.Pid); rss > peak {
			peak = rss
			if rss > maxRSS {
				_ = cmd.Process.Kill()
				exit := <-done
				t.Fatalf("the process grew to %d MiB of resident memory (killed: %v):\n%s", rss>>20, exit, tail(out.String()))
			}
		}
	}
}

// processRSS is a process's resident memory in bytes (0 when gone).
func processRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// TestACallPastWhatTheHostCanGiveFailsWithoutABudget: with no budget (or
// one larger than the host), a call that would take more than the Go
// memory limit leaves fails the same way, naming the host's limit and
// the thread's budget; one that fits works.
func TestACallPastWhatTheHostCanGiveFailsWithoutABudget(t *testing.T) {
	// Serial: sets the process's memory limit.
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	inUse := int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	old := debug.SetMemoryLimit(inUse + 256<<20)
	defer debug.SetMemoryLimit(old)
	for _, budget := range []int64{membudget.Off, 1 << 40} {
		_, err := evalBudgeted(t, budget, `return new Uint8Array(1 << 30).length`)
		if !errors.Is(err, membudget.ErrExceeded) {
			t.Fatalf("budget %d: %v", budget, err)
		}
		for _, want := range []string{"RangeError: out of memory", "1GiB at once", "from the Go memory limit", "GOMEMLIMIT"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
		if got, err := evalBudgeted(t, budget, `return new Uint8Array(4 << 20).length`); err != nil || got != int64(4<<20) {
			t.Fatalf("budget %d, 4 MiB: %v, %v", budget, got, err)
		}
	}
}

// TestAChildsOutputWaitsForJavaScript: between steps a run's JavaScript
// stands still, and a child writing without pause would fill the host's
// memory with chunks queued for it. At most outputInFlight chunks per
// stream wait; then the child waits on its pipe. When JavaScript runs
// again, the output flows again.
func TestAChildsOutputWaitsForJavaScript(t *testing.T) {
	e := newEnv(envConfig{host: budgetHost{newFakeHost(t), gateBudget}, bundleName: "gate.js", budget: gateBudget})
	defer e.close()
	var pid int64
	err := e.loop.runUntil(context.Background(), func() error {
		_ = e.vm.Set("require", func(name string) goja.Value { return e.requireModule(name) })
		v, err := e.vm.RunString(`
const child = require("child_process").spawn("cat", ["/dev/zero"]);
globalThis.got = 0;
child.stdout.on("data", (d) => { globalThis.got += d.length; });
child.pid`)
		if err == nil {
			pid = v.ToInteger()
		}
		return err
	}, func() bool { return true })
	if err != nil || pid == 0 {
		t.Fatalf("spawn: %v, pid %d", err, pid)
	}
	queued := func() int {
		e.loop.mu.Lock()
		defer e.loop.mu.Unlock()
		return len(e.loop.queue)
	}
	testkit.WaitUntil(t, "the child to wait on its pipe while JavaScript stands still", func() bool {
		if q := queued(); q > outputInFlight+1 {
			t.Fatalf("%d chunks queued for JavaScript (at most %d may wait)", q, outputInFlight)
		}
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		return strings.Contains(string(wchan), "pipe_write")
	})
	// JavaScript runs again: the output flows.
	err = e.loop.runUntil(context.Background(), nil, func() bool {
		return e.vm.Get("got").ToInteger() > 4*outputInFlight*outputChunk
	})
	if err != nil {
		t.Fatal(err)
	}
}
