#!/usr/bin/env node
// Generates ../vectors.json: test vectors for package canonyaml, computed
// with the reference implementation, yaml 2.8.4.
//
//   cd engine/canonyaml/testdata/gen && npm install && node gen-vectors.js
//   # or, with yaml@2.8.4 installed elsewhere:
//   NODE_PATH=/path/to/node_modules node gen-vectors.js
//
// Every vector is {json, style, yaml}: the input as JSON text (parsed with
// JSON.parse, so key order follows JavaScript object semantics), the string
// style ("plain" = YAML.stringify(v, {indent: 2}), "double" = the same with
// defaultStringType "QUOTE_DOUBLE") and the expected output.
//
// The corpus is deterministic. SEED, COUNT (number of random vectors) and
// OUT may be set in the environment to generate other corpora, e.g. a large
// one for a one-off differential run.
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');

const version = require('yaml/package.json').version;
if (version !== '2.8.4') {
  throw new Error(`yaml ${version} found, 2.8.4 required`);
}

const SEED = Number(process.env.SEED || 20240611);
const COUNT = Number(process.env.COUNT || 1300);
const OUT = process.env.OUT || path.join(__dirname, '..', 'vectors.json');

// mulberry32
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = prng(SEED);
const int = n => Math.floor(rnd() * n); // 0 <= int(n) < n
const pick = arr => arr[int(arr.length)];

const vectors = [];
const seen = new Set();
function add(jsonText, style) {
  const id = style + '\u0000' + jsonText;
  if (seen.has(id)) return;
  seen.add(id);
  const value = JSON.parse(jsonText);
  if (!wellFormed(value)) throw new Error(`lone surrogate in ${jsonText}`);
  const opts = style === 'double' ? { indent: 2, defaultStringType: 'QUOTE_DOUBLE' } : { indent: 2 };
  vectors.push({ json: jsonText, style, yaml: YAML.stringify(value, opts) });
}
// Go strings cannot hold unpaired surrogates, so no input may contain one.
function wellFormed(v) {
  if (typeof v === 'string') return v.isWellFormed();
  if (v && typeof v === 'object') {
    return Object.entries(v).every(([k, x]) => k.isWellFormed() && wellFormed(x));
  }
  return true;
}
const addValue = (v, style) => add(JSON.stringify(v), style);
const both = v => {
  addValue(v, 'plain');
  addValue(v, 'double');
};
const envelope = payload => ({ type: 'content', payload, refs: [] });

// Nest value under depth levels of mappings (keys k1, k2, ...).
function nest(value, depth, key = 'k') {
  for (let d = depth; d > 0; d--) value = { [key + d]: value };
  return value;
}

// ---------------------------------------------------------------- strings

const words = ('lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ' +
  'incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ' +
  'ullamco laboris nisi aliquip ex ea commodo consequat the a an of to in is it you that').split(' ');

function prose(len, newlines) {
  let s = '';
  while (s.length < len) {
    if (s) s += newlines && rnd() < 0.08 ? (rnd() < 0.3 ? '\n\n' : '\n') : ' ';
    s += pick(words);
    if (rnd() < 0.07) s += pick(['.', ',', ':', ';', '!', '?']);
  }
  return s.slice(0, len).replace(/\s+$/, '') || 'x';
}

const markdown = [
  '# Title\n\nSome intro text that is long enough to need folding when it is written as a folded block scalar by the emitter.\n\n- item one\n- item two\n  continued\n- item three\n\n```go\nfunc main() {\n\tfmt.Println("hi")\n}\n```\n',
  'Plan:\n1. Read the file\n2. Change it\n   - carefully\n   - twice\n3. Done\n\n    indented code block\n    second line\n\nTrailing paragraph.',
  '## Notes\n\n> quoted text that goes on and on and on for a while so that the line is longer than eighty columns total\n\n* a\n* b\n\n\n\nEnd',
  'line with trailing spaces   \nnext line\n',
  '  leading indented first line\nthen normal\n  indented again\nend\n\n',
  'a very long first line that definitely exceeds the eighty column limit of the yaml emitter, so it folds\n  more indented line that is also quite long and should not be folded by the emitter at all, right?\nback to normal text that is long enough to be folded again when it crosses the limit of eighty chars\n',
  'short\n\n\n\nlines\n\n',
  '\n\nstarts with blank lines and then a long line that needs to be folded because it is longer than eighty\n',
  'tabs\tinside\ttext\tand a long line that keeps going past the limit of eighty columns for sure yes\n\tindented with tab\nend',
  'code:\n```\n  x = 1\n  y = 2\n```\nA sentence that is quite long and would be folded if the emitter chose the folded style here ok.\n',
  'Para one is long enough to be folded at eighty columns because it contains many many words in it.\n\nPara two is also long enough to be folded at eighty columns because it contains many words too.\n\n\nPara three.',
  'x'.repeat(100) + '\n' + 'y '.repeat(60) + '\n',
  '- list item at start\n- another\n',
  '---\nfront: matter\n---\n\nbody text',
  '...\nafter document end marker',
  'text\n...\nmore',
  'ends with spaces after newline\n  ',
  'ends with tab after newline\n\t',
  ' \n',
  '\n \n',
  'a\n\n',
  'a\n\n\n',
];

const fixed = [
  '', ' ', '  ', '\t', '\n', '\n\n', ' \n ', '\t\n', '\n\t', 'hello', 'hello world', ' leading', 'trailing ',
  ' both ', '\nleading newline', 'trailing newline\n', 'two trailing\n\n', 'three trailing\n\n\n',
  'line1\nline2\nline3', 'trailing\n', '{"plan":1}', '123', 'true', 'null', 'a: b', 'fix #191',
  'x'.repeat(81) + ' y', 'x'.repeat(80) + ' y', 'x'.repeat(79) + ' y', 'x'.repeat(200),
  '- x', '? x', '-', '?', ':', 'a:b', 'a: b', '#x', 'a #b', 'a#b', 'a:', 'a :', '::', '-x', '?x', ':x',
  '- ', '? ', '-\tx', '?\tx', 'a:\tb', 'a\t#b', 'a\n#b', 'x\n- y', 'x\n? y', 'a\n b', 'a \nb', 'a\n\nb',
  '---', '...', '--- x', '...x', '----', '--', 'a\n---\nb', 'a\n...', '%YAML 1.2', 'a\n%b', '---\n', 'x\r---',
  'x\u2028---', 'x\u2029...', 'x\u2028%y', '-- -', '. . .',
  "it's", 'say "hi"', 'both \' and "', "'", '"', "''", '""', '"quoted"', "'single'", 'a"b\'c',
  '"\n"', "'\n'", 'a "b"\nc', 'He said "hello there" to everyone in the room, and then left without another word at all.',
  'a\tb', '\ta', 'a\t', 'a\t\nb', 'a\n\tb', 'a\r\nb', '\r\n', 'a\rb', 'line\r\n', '\r',
  '😀', '日本語', 'emoji 😀 in text', '😀'.repeat(50), '😀 '.repeat(30), 'ü'.repeat(90), 'é a'.repeat(40),
  '中文 '.repeat(30), '\u00a0', 'a\u00a0b', '\u00a0lead', '\ufeffbom', 'x\ufeff', '\u2028', '\u2029',
  'a\u2028b', 'a\u2029b', '\u0085', 'a\u0085b', '\ufffd', '\uffff', '\ufffe',
  '0', '-1', '+1', '0x1F', '0X1F', '0o17', '0O17', '0b101', '1e3', '1E3', '1e+3', '1e-3', '.5', '-.5', '+.5',
  '1.', '1.5', '-1.5e-7', '.inf', '-.inf', '+.inf', '.Inf', '.INF', '.NaN', '.nan', '.NAN', 'nan', 'inf',
  '~', 'Null', 'NULL', 'nULL', 'TRUE', 'True', 'tRUE', 'false', 'False', 'FALSE', 'yes', 'Yes', 'no', 'on',
  'off', 'y', 'n', 'Y', 'N', '1_000', '017', '0x', '0o', '0xg', '0o8', '1e', 'e3', '+', '-0', '00', '1.2.3',
  '12:30', '2001-12-14', '2001-12-14t21:59:43.10-05:00', '<<', '=', '!!str', '&a', '*a', '!tag', '@x', '`x`',
  '%x', '|', '>', '|-', '>+', 'a|b', 'a>b', 'a,b', '[a]', '{a}', 'a[b]', 'a{b}', 'a,', ',a', '[', ']', '{', '}',
  'http://example.com/path?x=1#frag', 'C:\\path\\to\\file', 'back\\slash', '\\', '\\n', '\\u0041',
  'x: y: z', 'key: value\nother: thing', '- a\n- b', 'a - b', 'a ? b', 'a ?b', '?-', '-?', 'a:b:c',
  ' #comment', 'a  b', 'a   ', '   ', '\n\n\n', ' \n', '\n ', 'a\n ', 'a\n\t', 'a \n', 'a\t\n',
  'x'.repeat(1025), 'a '.repeat(520),
];

for (const c of ',[]{}#&*!|>\'"%@`-?:') {
  fixed.push(c, c + 'abc', c + ' abc', 'abc' + c, 'ab' + c + 'c', 'ab ' + c + ' c', 'ab\n' + c + 'c');
}
for (let cp = 0; cp < 0x20; cp++) {
  const ch = String.fromCharCode(cp);
  fixed.push(ch, 'a' + ch + 'b', ch + ' lead', 'x'.repeat(70) + ch + 'y'.repeat(20));
}
for (let cp = 0x7f; cp <= 0xa0; cp++) fixed.push('a' + String.fromCharCode(cp) + 'b');

// lines around the 80-column limit: the plain / quoted folding and the
// literal / folded block choice all depend on it.
for (const len of [58, 59, 60, 61, 62, 76, 77, 78, 79, 80, 81, 82, 83]) {
  fixed.push('x'.repeat(len - 2) + ' y');
  fixed.push('a b'.repeat(Math.ceil(len / 3)).slice(0, len));
  fixed.push('word '.repeat(Math.ceil(len / 5)).slice(0, len).trimEnd() + 'z');
  fixed.push('line one\n' + 'w'.repeat(len - 2) + ' y');
  fixed.push('line one\n' + 'w'.repeat(len - 2) + ' y\n');
  fixed.push('q"' + 'x'.repeat(len - 4) + ' y');
  fixed.push('c\u0001' + 'x'.repeat(len - 4) + ' y');
  fixed.push('😀'.repeat(Math.floor(len / 2)) + ' tail');
}

// ---------------------------------------------------------------- hand-picked

add('{"type":"content","payload":"hello","refs":[]}', 'plain');
for (const s of fixed.concat(markdown)) {
  both(envelope(s));
}
fixed.forEach((s, i) => {
  addValue({ [s]: 'v' }, i % 2 === 0 ? 'plain' : 'double');
  const style = i % 5 === 0 ? 'double' : 'plain';
  switch (i % 4) {
    case 0: addValue(['item', s], style); break;
    case 1: addValue(nest(s, 3), style); break;
    case 2: addValue([{ key: s, n: 1 }], style); break;
    default: addValue({ [s]: [s] }, style);
  }
});
for (const s of markdown) {
  for (let d = 1; d <= 4; d++) addValue(nest({ payload: s }, d - 1), 'plain');
  addValue([s], 'plain');
  addValue([[s]], 'plain');
  addValue({ [s]: 1 }, 'plain');
}
for (let i = 0; i < 40; i++) {
  const s = prose(50 + int(350), i % 2 === 0);
  both(envelope(s));
  addValue(nest(s, 1 + int(4)), 'plain');
}
for (const len of [90, 150, 300]) {
  const word = 'w'.repeat(len);
  both(envelope(word));
  both(envelope('start ' + word + ' end'));
  both(envelope(word + '\n' + word));
  addValue(['- ' + word], 'plain');
}
// exact widths at different nesting depths and key lengths
for (let depth = 0; depth <= 4; depth++) {
  for (const keyLen of [1, 7, 20, 57, 58, 59, 60, 70]) {
    const key = 'k'.repeat(keyLen);
    for (const width of [79, 80, 81, 82]) {
      const room = width - depth * 2 - keyLen - 2;
      if (room < 3) continue;
      const s = 'x'.repeat(room - 2) + ' y';
      addValue(nest({ [key]: s }, depth), 'plain');
      addValue(nest({ [key]: s + ' zz' }, depth), 'double');
      addValue(nest({ [key]: 'a\n' + 'b'.repeat(room) }, depth), 'plain');
    }
  }
}
// deep nesting leaves little or no room for content
for (const depth of [20, 30, 36, 38, 39, 40, 41, 45]) {
  const long = 'y'.repeat(30) + ' ' + 'z'.repeat(40) + ' tail words here';
  addValue(nest({ s: long }, depth), 'plain');
  addValue(nest({ s: long + '\u0001' + long }, depth), 'plain');
  addValue(nest({ s: long }, depth), 'double');
  addValue(nest({ s: 'p\n' + long }, depth), 'plain');
  addValue(nest([long, 'a\n' + long], depth), 'plain');
}
// Sequence items have no known start column, so past 40 levels the room
// left is negative; yaml then folds double-quoted lines at negative
// offsets (and writes "undefined"). Emulated for byte equality.
for (const depth of [37, 38, 39, 40, 41, 44]) {
  for (const s of ['\u0001' + 'x'.repeat(100), 'y '.repeat(60), 'a "b\' c '.repeat(12), 'w'.repeat(30) + '\n' + 'v'.repeat(30)]) {
    let v = s;
    for (let i = 0; i < depth; i++) v = [v];
    addValue(v, 'plain');
    addValue(v, 'double');
  }
}
// explicit keys (longer than 1024)
for (const key of ['x'.repeat(1025), 'a '.repeat(513), 'q"'.repeat(513)]) {
  for (const value of ['v', 'x'.repeat(100) + ' y', ['a', 'b'], { c: 1, d: [] }, [], {}, null, 'l1\nl2']) {
    addValue({ [key]: value }, 'plain');
    addValue({ top: { [key]: value } }, 'double');
  }
}
// collections
for (const style of ['plain', 'double']) {
  addValue({}, style);
  addValue([], style);
  addValue({ a: {}, b: [], c: [[]], d: [{}], e: [[], {}] }, style);
  addValue([[1, [2, [3, []]]], [{ a: [{ b: { c: [] } }] }]], style);
  addValue([{ a: 1, b: 2 }, { c: { d: [1, 2] } }, [{ e: null }]], style);
  addValue({ a: [{ b: [{ c: 'x' }] }], long: [['x'.repeat(90) + ' y']] }, style);
  addValue({ seq: ['a', 'b\nc', '', null, true, false, 0, -1.5] }, style);
}
addValue({
  type: 'start',
  payload: { name: 'demo', hash: 'BUNDLEAAAAAAA', depth: 0, parentState: null },
  refs: ['SSVQ0RZ55P9Y4'],
}, 'plain');
add('{"config": null, "workflows": {"a": {"hash": "X", "timestamp": 1, "history": []}}}', 'double');
// JSON.parse key order and duplicates
for (const style of ['plain', 'double']) {
  add('{"b":1,"2":2,"1":3,"a":4,"01":5,"4294967295":6,"4294967294":7,"-1":8,"1.5":9,"0":10}', style);
  add('{"a":1,"b":2,"a":3}', style);
  add('{"10":1,"9":2,"x":{"3":"c","1":"a","2":"b"}}', style);
}
// numbers
const numberTexts = ['0', '-0', '1', '-1', '1.5', '0.1', '0.2', '0.30000000000000004', '1e21', '1e20',
  '123456789012345680000', '1e-7', '1e-6', '0.000001', '0.0000001', '1.5e-7', '9007199254740992',
  '9007199254740993', '-9007199254740992', '1.7976931348623157e308', '5e-324', '2.2250738585072014e-308',
  '1e308', '1e309', '-1e309', '100', '1e2', '12345678901234567890', '0.5', '-0.0', '3.14159', '2.5e+25',
  '4294967295', '4294967296', '1.0', '10.50', '1E400', '123e-20', '1.23e-5', '0.00001234'];
for (const t of numberTexts) {
  add(`{"n":${t}}`, 'plain');
  add(`{"n":${t}}`, 'double');
  add(`[${t}]`, 'plain');
  add(t, 'plain');
}
for (const t of ['"hello"', '"a\\nb"', '" a\\nb"', '"---"', '"--- x"', '"..."', '"%x"', '"a\\n---\\nb"',
  'true', 'false', 'null', '"x\\n"', '"x\\n\\n"', '"\\n"', '"123"', '""', '" "', '"a: b"',
  JSON.stringify('x'.repeat(90) + ' y'), JSON.stringify(prose(200, true)), JSON.stringify('q"\n' + 'x'.repeat(100))]) {
  add(t, 'plain');
  add(t, 'double');
}

// ---------------------------------------------------------------- random

const alphabet = [
  [30, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'],
  [16, ' '],
  [5, '\n'],
  [2, '\t'],
  [2, '\'"'],
  [6, ':#-?{}[],&*!|>%@`'],
  [4, '0123456789.+'],
  [1, '\\/'],
  [2, ['é', 'ü', 'ß', '中', '文', '日', '😀', '🎉', '\u00a0', '\u2028', '\u0085', '\u200b', '\ufeff']],
  [1, ['\u0000', '\u0001', '\u0007', '\u0008', '\u000b', '\u000c', '\r', '\u001b', '\u007f', '\u009f']],
];
const alphabetTotal = alphabet.reduce((s, [w]) => s + w, 0);
function randChar() {
  let r = int(alphabetTotal);
  for (const [w, chars] of alphabet) {
    if (r < w) return Array.isArray(chars) ? pick(chars) : chars[int(chars.length)];
    r -= w;
  }
  throw new Error('unreachable');
}
function randString() {
  const r = rnd();
  const len = r < 0.1 ? int(4) : r < 0.6 ? int(40) : r < 0.9 ? 40 + int(80) : 120 + int(250);
  let s = '';
  const mode = rnd();
  for (let i = 0; i < len; i++) {
    if (mode < 0.3 && rnd() < 0.8) {
      s += i % 7 === 6 ? ' ' : 'abcdefgh'[int(8)]; // mostly words
    } else {
      s += randChar();
    }
  }
  return s;
}
const randKey = () => (rnd() < 0.6 ? pick(['payload', 'name', 'meta', 'x', 'a-b', 'key with spaces', 'k']) : Array.from(randString()).slice(0, 30).join(''));
function randScalar() {
  const r = rnd();
  if (r < 0.75) return randString();
  if (r < 0.85) return pick([null, true, false]);
  return randNumber();
}
function randNumber() {
  const r = rnd();
  if (r < 0.3) return int(2000) - 1000;
  if (r < 0.5) return Math.round((rnd() - 0.5) * 1e6) / 100;
  if (r < 0.7) return (rnd() - 0.5) * Math.pow(10, int(60) - 30);
  // random bit patterns
  const buf = new DataView(new ArrayBuffer(8));
  buf.setUint32(0, Math.floor(rnd() * 4294967296));
  buf.setUint32(4, Math.floor(rnd() * 4294967296));
  const f = buf.getFloat64(0);
  return Number.isFinite(f) ? f : 0;
}
function randValue(depth) {
  if (depth <= 0 || rnd() < 0.35) return randScalar();
  const n = int(4);
  if (rnd() < 0.5) {
    const a = [];
    for (let i = 0; i < n; i++) a.push(randValue(depth - 1));
    return a;
  }
  const o = {};
  for (let i = 0; i < n; i++) o[randKey()] = randValue(depth - 1);
  return o;
}

for (let i = 0; i < COUNT; i++) {
  const style = rnd() < 0.7 ? 'plain' : 'double';
  const s = randString();
  let v;
  switch (int(7)) {
    case 0:
    case 1:
      v = envelope(s);
      break;
    case 2:
      v = nest({ [randKey()]: s }, int(4));
      break;
    case 3:
      v = { [s]: randScalar(), other: s };
      break;
    case 4:
      v = { refs: [s, randScalar(), [s]] };
      break;
    case 5:
      v = [{ [randKey()]: s, b: [s] }, { c: { [s]: [] } }];
      break;
    default:
      v = randValue(4);
  }
  addValue(v, style);
}

fs.writeFileSync(OUT, JSON.stringify(vectors, null, 0).replace(/\},\{"json"/g, '},\n{"json"') + '\n');
console.log(`wrote ${vectors.length} vectors to ${OUT}`);
