package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, relative to this package's directory.
const repoRoot = ".."

// notLinkChecked are Markdown files whose relative links are meant to
// resolve somewhere else than here, with the reason.
var notLinkChecked = map[string]string{
	"connector/cli/scaffold": "written into a new workspace by `init workspace`; its links resolve there",
	"connector/cli/skills":   "printed by `uncaged-workflow skill`; read in a terminal, not as files",
}

// markdownFiles lists the repository's Markdown documents, relative to
// its root: every .md file but those under node_modules, testdata, hidden
// directories and notLinkChecked.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			if _, skip := notLinkChecked[rel]; skip {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".md") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocLinksResolve: every relative link in the repository's documents
// names a file or directory of the repository, and its #anchor a heading
// of the Markdown file it names (by GitHub's rule for heading ids); every
// absolute link is a well-formed http(s) or mailto URL (not fetched: the
// tests run without the internet). A page moved or a heading renamed
// fails here instead of in a reader's browser.
func TestDocLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	for _, must := range []string{"README.md", "docs/cli.md", "docs/gateway.md", "deploy/k8s/README.md"} {
		if !slices.Contains(files, must) {
			t.Fatalf("%s is not among the documents checked (%d found); is the test running in docs/?", must, len(files))
		}
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		anchors[file] = headingAnchors(string(b))
		return anchors[file]
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			links++
			if err := checkLink(file, l.target, anchorsOf); err != nil {
				t.Errorf("%s:%d: link %q: %v", file, l.line, l.target, err)
			}
		}
	}
	t.Logf("%d links in %d documents", links, len(files))
	if links < 50 {
		t.Errorf("found only %d links in %d documents; is the link pattern still right?", links, len(files))
	}
}

// checkLink checks one link target found in file (relative to the
// repository root); anchorsOf gives a Markdown file's heading anchors.
func checkLink(file, target string, anchorsOf func(string) map[string]bool) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" || strings.ContainsAny(target, " \t<>\"") {
			return fmt.Errorf("not a well-formed %s URL", u.Scheme)
		}
		return nil
	case "mailto":
		if u.Opaque == "" || !strings.Contains(u.Opaque, "@") {
			return fmt.Errorf("not a mail address")
		}
		return nil
	case "":
	default:
		return fmt.Errorf("scheme %q: links are relative paths, http(s) or mailto", u.Scheme)
	}
	if u.Host != "" || u.RawQuery != "" {
		return fmt.Errorf("a relative link with a host or query")
	}
	dest := file
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			dest = path.Clean(strings.TrimPrefix(u.Path, "/"))
		} else {
			dest = path.Join(path.Dir(file), u.Path)
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Errorf("points outside the repository")
		}
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(dest))); err != nil {
			return fmt.Errorf("no such file or directory: %s", dest)
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	if !anchorsOf(dest)[u.Fragment] {
		return fmt.Errorf("%s has no heading with the anchor #%s", dest, u.Fragment)
	}
	return nil
}

// link is a link target and the line it is on.
type link struct {
	line   int
	target string
}

var (
	// inlineLink is [text](target) or ![alt](target), with an optional
	// title; the target may be in angle brackets.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// referenceDef is a reference definition: [label]: target.
	referenceDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	// autolink is <scheme:...>.
	autolink = regexp.MustCompile(`<((?:https?|mailto):[^>\s]*)>`)
	// codeSpan is inline code, which holds no links.
	codeSpan = regexp.MustCompile("(`+)[^`]*?(?:`[^`]+)*?`+")
)

// markdownLinks returns the link targets of a Markdown text, outside code
// blocks and code spans.
func markdownLinks(text string) []link {
	var out []link
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence = f
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		if m := referenceDef.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, strings.Trim(m[1], "<>")})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, strings.Trim(m[1], "<>")})
		}
		for _, m := range autolink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

var (
	// atxHeading is a heading line: 1 to 6 #, a space, the text, and an
	// optional closing run of #.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	// htmlAnchor is an explicit anchor: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:name|id)="([^"]+)"`)
	// headingLink is a link inside a heading, of which only the text counts.
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives a Markdown text's
// headings (outside code blocks), and its explicit HTML anchors.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence = f
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := githubSlug(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// githubSlug is the anchor GitHub gives a heading: its text (a link's
// text, no markup characters) in lower case, with every character that is
// not a letter, mark, digit, connector (_), space or hyphen dropped and
// each space turned into a hyphen. A repeated anchor gets -1, -2, … in
// order (headingAnchors).
func githubSlug(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', unicode.IsLetter(r), unicode.IsMark(r), unicode.IsDigit(r), unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestGitHubSlug pins githubSlug to anchors GitHub gives.
func TestGitHubSlug(t *testing.T) {
	cases := map[string]string{
		"Storage":                                   "storage",
		"The gateway (`uncaged-gateway`)":           "the-gateway-uncaged-gateway",
		"Credentials, strongest first":              "credentials-strongest-first",
		"What `kill -9` can and cannot lose":        "what-kill--9-can-and-cannot-lose",
		"Measuring it: `make bench-ops`":            "measuring-it-make-bench-ops",
		"`uncaged-gateway` (every command)":         "uncaged-gateway-every-command",
		"init, build, setup, skill":                 "init-build-setup-skill",
		"A dashboard request, end to end":           "a-dashboard-request-end-to-end",
		"Who may do what: the trust model":          "who-may-do-what-the-trust-model",
		"snake_case and **bold** — dash":            "snake_case-and-bold--dash",
		"See [the CLI](cli.md) first":               "see-the-cli-first",
		"Ünïcode Ärger 2.0":                         "ünïcode-ärger-20",
		"`uncaged-workflow thread list` (-o table)": "uncaged-workflow-thread-list--o-table",
	}
	for in, want := range cases {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHeadingAnchors: headings in code blocks are not headings, a repeated
// heading gets a numbered anchor, closing #s and explicit anchors count.
func TestHeadingAnchors(t *testing.T) {
	text := "# Title\n\n## Setup ##\n\n```sh\n# not a heading\n```\n\n## Setup\n\n<a name=\"here\"></a>\n#hashtag\n"
	got := headingAnchors(text)
	for _, want := range []string{"title", "setup", "setup-1", "here"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "hashtag"} {
		if got[not] {
			t.Errorf("anchor %q should not exist: %v", not, got)
		}
	}
}

// TestMarkdownLinks: links are found in prose, lists and tables, with
// titles and angle brackets, as reference definitions and autolinks; not
// in code spans or code blocks.
func TestMarkdownLinks(t *testing.T) {
	text := "See [a](a.md) and ![img](i.png \"title\").\n" +
		"| x | [b](<b c.md#d>) |\n" +
		"- item [e](https://example.com/x_(y)) and `[not](code.md)`\n" +
		"```\n[nor](this.md)\n```\n" +
		"[ref]: ref.md#sec\n" +
		"<https://example.org/z> and [1/6] alone\n"
	var got []string
	for _, l := range markdownLinks(text) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := []string{"1:a.md", "1:i.png", "2:b c.md#d", "3:https://example.com/x_(y)", "7:ref.md#sec", "8:https://example.org/z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links %q, want %q", got, want)
	}
}

// TestCheckLink: what a link may point at.
func TestCheckLink(t *testing.T) {
	anchors := func(file string) map[string]bool {
		return map[string]bool{"commands": true}
	}
	cases := []struct {
		file, target string
		ok           bool
	}{
		{"README.md", "docs/cli.md", true},
		{"README.md", "docs/gateway.md#commands", true},
		{"README.md", "docs/gateway.md#no-such-heading", false},
		{"README.md", "docs/nosuch.md", false},
		{"docs/cli.md", "../README.md", true},
		{"docs/cli.md", "#commands", true},
		{"docs/cli.md", "#elsewhere", false},
		{"docs/cli.md", "../../outside.md", false},
		{"README.md", "deploy/k8s/", true},
		{"README.md", "/docs/cli.md", true},
		{"README.md", "https://github.com/uncaged/workflow", true},
		{"README.md", "https:///nohost", false},
		{"README.md", "http://exa mple.com", false},
		{"README.md", "ftp://example.com/x", false},
		{"README.md", "mailto:someone@example.com", true},
		{"README.md", "Makefile#L10", true},
	}
	for _, c := range cases {
		err := checkLink(c.file, c.target, anchors)
		if (err == nil) != c.ok {
			t.Errorf("checkLink(%q, %q) = %v, want ok=%v", c.file, c.target, err, c.ok)
		}
	}
}
