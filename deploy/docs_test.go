package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// documentedCommand matches a command line of either binary in prose or
// code: the binary's name and the words after it, up to the end of the
// line, a closing backtick, a shell operator or a comment.
var documentedCommand = regexp.MustCompile("(?:^|[\\s`(\"'])(uncaged-gateway|uncaged-workflow) ([a-z][^`|;&)#\\n]*)")

// deployDocs are the documents that tell you to run a command of either
// binary: the README, every page of docs/ and the deployment files, with
// the part of each to read (all of it, or one section).
var deployDocs = []struct{ file, section string }{
	{"k8s/README.md", ""},
	{composeFile, ""},
	{"../README.md", ""},
}

// withDocsPages adds every page of docs/ to deployDocs: a page added
// there is checked without a line here.
func withDocsPages(t *testing.T) []struct{ file, section string } {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/ pages: %q, %v", pages, err)
	}
	out := slices.Clone(deployDocs)
	for _, p := range pages {
		out = append(out, struct{ file, section string }{p, ""})
	}
	return out
}

var inlineCode = regexp.MustCompile("`[^`\n]+`")

// markdownCode is the code in a Markdown text, one piece a line: its
// fenced blocks' lines and its inline code spans (prose names the
// binaries too, and is not a command).
func markdownCode(text string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			fenced = !fenced
		case fenced:
			b.WriteString(line + "\n")
		default:
			for _, span := range inlineCode.FindAllString(line, -1) {
				b.WriteString(span + "\n")
			}
		}
	}
	return b.String()
}

// documentedCommands are the command lines (binary, arguments) in text.
func documentedCommands(text string) [][2]string {
	var out [][2]string
	for _, m := range documentedCommand.FindAllStringSubmatch(text, -1) {
		out = append(out, [2]string{m[1], strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[2]), `\`))})
	}
	return out
}

// TestDocumentedCommandsAreReal: every command line of the two binaries
// that the README, the docs and the deployment files tell you to run names
// a real command and uses only its flags, so a flag renamed in the code
// fails here, not in a reader's terminal.
func TestDocumentedCommandsAreReal(t *testing.T) {
	t.Parallel()
	total := 0
	for _, doc := range withDocsPages(t) {
		b, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if doc.section != "" {
			_, after, ok := strings.Cut(text, doc.section)
			if !ok {
				t.Fatalf("%s has no section %q", doc.file, strings.TrimSpace(doc.section))
			}
			text, _, _ = strings.Cut(after, "\n## ")
		}
		if strings.HasSuffix(doc.file, ".md") {
			text = markdownCode(text)
		}
		for _, c := range documentedCommands(text) {
			words, err := shellWords(c[1])
			if err != nil {
				// Prose around a command may hold a lone quote; the
				// command itself is then checked up to it.
				words = strings.Fields(c[1])
			}
			total++
			checkArgs(t, doc.file+": "+c[0]+" "+c[1], binary(t, c[0]), words)
		}
	}
	if total < 20 {
		t.Errorf("found only %d documented command lines; is the pattern still right?", total)
	}
}

func TestDocumentedCommandsFindsCommands(t *testing.T) {
	t.Parallel()
	code := markdownCode("# uncaged-gateway on Kubernetes\nprose with `uncaged-gateway status --json` in it\n```sh\nuncaged-gateway serve\n```\n")
	if code != "`uncaged-gateway status --json`\nuncaged-gateway serve\n" {
		t.Errorf("markdownCode: %q", code)
	}
	got := documentedCommands("run `uncaged-gateway token revoke ID | --connector NAME` or\n" +
		"kubectl exec x -- uncaged-gateway token create --dashboard  # a comment\n" +
		"`uncaged-gateway` alone, (uncaged-workflow status --json) and uncaged-gatewayx y\n")
	want := [][2]string{
		{"uncaged-gateway", "token revoke ID"},
		{"uncaged-gateway", "token create --dashboard"},
		{"uncaged-workflow", "status --json"},
	}
	if len(got) != len(want) {
		t.Fatalf("%q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q, want %q", got[i], want[i])
		}
	}
}
