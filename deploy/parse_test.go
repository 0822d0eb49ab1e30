package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN, ...
	Args string
	Line int
}

var dockerfileInstructions = map[string]bool{
	"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "EXPOSE": true, "ENV": true, "ADD": true,
	"COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true, "WORKDIR": true, "ARG": true,
	"ONBUILD": true, "STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true,
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// blank lines dropped, backslash continuations joined.
func parseDockerfile(src string) ([]instruction, error) {
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(src))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		cont := strings.HasSuffix(line, `\`)
		cur.WriteString(strings.TrimSpace(strings.TrimSuffix(line, `\`)))
		if cont {
			cur.WriteString(" ")
			continue
		}
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		cmd = strings.ToUpper(cmd)
		if !dockerfileInstructions[cmd] {
			return nil, fmt.Errorf("line %d: unknown instruction %q", start, cmd)
		}
		out = append(out, instruction{Cmd: cmd, Args: strings.TrimSpace(args), Line: start})
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: continuation runs past the end of the file", start)
	}
	if len(out) == 0 || !hasInstruction(out, "FROM") {
		return nil, errors.New("no FROM instruction")
	}
	return out, nil
}

func hasInstruction(ins []instruction, cmd string) bool {
	for _, i := range ins {
		if i.Cmd == cmd {
			return true
		}
	}
	return false
}

// execForm decodes an instruction's JSON array form (CMD ["a", "b"]).
func execForm(args string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(args), &out); err != nil || len(out) == 0 {
		return nil, fmt.Errorf("not a JSON array of strings: %s", args)
	}
	return out, nil
}

// shellWords splits a shell command line into words the way sh would for
// the simple lines in our files: quotes group, backslash escapes, no
// expansion. Operators (&&, ;) come back as words of their own.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// commands splits shell words at && and ; into simple commands, dropping a
// leading exec.
func commands(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range append(words, "&&") {
		if w == "&&" || w == ";" {
			if len(cur) > 0 && cur[0] == "exec" {
				cur = cur[1:]
			}
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	return out
}

// unitFile is a systemd unit: section -> key -> values (a key may repeat).
type unitFile map[string]map[string][]string

func parseUnit(src string) (unitFile, error) {
	u := unitFile{}
	section := ""
	for n, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", n+1, line)
			}
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("line %d: not key=value: %q", n+1, line)
			}
			if section == "" {
				return nil, fmt.Errorf("line %d: %q outside a section", n+1, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	if len(u) == 0 {
		return nil, errors.New("no sections")
	}
	return u, nil
}

// yamlDocs decodes every document of a multi-document YAML file.
func yamlDocs(b []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			out = append(out, doc)
		}
	}
}

// dig walks nested maps and lists: dig(doc, "spec", "template", 0).
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func digString(v any, path ...any) string {
	s, _ := dig(v, path...).(string)
	return s
}

func digList(v any, path ...any) []any {
	l, _ := dig(v, path...).([]any)
	return l
}

func digMap(v any, path ...any) map[string]any {
	m, _ := dig(v, path...).(map[string]any)
	return m
}

func TestParseDockerfile(t *testing.T) {
	t.Parallel()
	ins, err := parseDockerfile("# syntax=docker/dockerfile:1\nARG X=1\nFROM golang:1 AS b\nRUN a \\\n  b \\\n  c\n\nCMD [\"x\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 4 || ins[2].Cmd != "RUN" || ins[2].Args != "a b c" || ins[2].Line != 4 {
		t.Fatalf("%+v", ins)
	}
	for src, want := range map[string]string{
		"FROM a\nRUN x \\\n": "continuation runs past the end",
		"FROM a\nFROB x\n":   "unknown instruction",
		"RUN x\n":            "no FROM",
		"# only a comment\n": "no FROM",
		"":                   "no FROM",
	} {
		if _, err := parseDockerfile(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	if _, err := execForm(`["a", 1]`); err == nil {
		t.Error("non-string array accepted")
	}
	if _, err := execForm(`a b`); err == nil {
		t.Error("shell form accepted as exec form")
	}
	if _, err := execForm(`[]`); err == nil {
		t.Error("empty array accepted")
	}
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	w, err := shellWords(`CGO_ENABLED=0 go build -ldflags "-s -w -X a.b=${V}" -o '/out/x y' ./p && exec bin\ ary --f`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CGO_ENABLED=0", "go", "build", "-ldflags", "-s -w -X a.b=${V}", "-o", "/out/x y", "./p", "&&", "exec", "bin ary", "--f"}
	if strings.Join(w, "|") != strings.Join(want, "|") {
		t.Fatalf("%q", w)
	}
	if c := commands(w); len(c) != 2 || c[1][0] != "bin ary" {
		t.Fatalf("commands: %q", c)
	}
	for _, bad := range []string{`a "b`, `a 'b`, `a \`} {
		if _, err := shellWords(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseUnit(t *testing.T) {
	t.Parallel()
	u, err := parseUnit("# c\n[Unit]\nA=1\n[Service]\nExecStart=x y\nEnvironment=a=b\nEnvironment=c=d\n")
	if err != nil {
		t.Fatal(err)
	}
	if u["Unit"]["A"][0] != "1" || len(u["Service"]["Environment"]) != 2 || u["Service"]["Environment"][0] != "a=b" {
		t.Fatalf("%v", u)
	}
	for src, want := range map[string]string{
		"A=1\n":           "outside a section",
		"[Unit\nA=1\n":    "bad section header",
		"[Unit]\nnokey\n": "not key=value",
		"[Unit]\n=v\n":    "not key=value",
		"# nothing\n":     "no sections",
	} {
		if _, err := parseUnit(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

func TestYAMLDocs(t *testing.T) {
	t.Parallel()
	docs, err := yamlDocs([]byte("a: 1\n---\n# empty\n---\nb: {c: [x, {d: e}]}\n"))
	if err != nil || len(docs) != 2 || digString(docs[1], "b", "c", 1, "d") != "e" || dig(docs[1], "b", "c", 5) != nil || dig(docs[0], "a", "x") != nil {
		t.Fatalf("%v %v", docs, err)
	}
	if _, err := yamlDocs([]byte("a: [1\n")); err == nil {
		t.Error("broken YAML accepted")
	}
	if _, err := yamlDocs([]byte("- a list\n")); err == nil {
		t.Error("a list where a manifest belongs accepted")
	}
}
