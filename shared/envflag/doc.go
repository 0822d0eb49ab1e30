package envflag

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// DocAnnotation is the flag annotation key holding the default the
// configuration docs show instead of the flag's computed one, for defaults
// that depend on the machine (the host name) or the environment.
const DocAnnotation = "doc-default"

// DocDefault sets the default the configuration docs show for flag name.
func DocDefault(fs *pflag.FlagSet, name, text string) {
	if err := fs.SetAnnotation(name, DocAnnotation, []string{text}); err != nil {
		panic(fmt.Sprintf("envflag: %v", err))
	}
}

// Markdown renders a command tree's flags, their variables and defaults as
// Markdown: one table for the root's flags (which every command has), then
// one per command that has flags of its own.
func Markdown(root *cobra.Command) string {
	var b strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		var flags []*pflag.Flag
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && !f.Hidden {
				flags = append(flags, f)
			}
		})
		if len(flags) > 0 {
			title := "`" + c.CommandPath() + "`"
			if c == root {
				title += " (every command)"
			}
			fmt.Fprintf(&b, "### %s\n\n| flag | variables | default | what it does |\n|---|---|---|---|\n", title)
			for _, f := range flags {
				fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, codes(Names(f)), docDefault(f), cell(usage(f)))
			}
			b.WriteString("\n")
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return b.String()
}

func usage(f *pflag.Flag) string {
	if envs := Names(f); len(envs) > 0 {
		return strings.TrimSuffix(f.Usage, " (env "+strings.Join(envs, ", ")+")")
	}
	return f.Usage
}

func docDefault(f *pflag.Flag) string {
	if d := f.Annotations[DocAnnotation]; len(d) > 0 {
		return cell(d[0])
	}
	switch f.DefValue {
	case "", "[]", "false", "0", "0s":
		return ""
	}
	return "`" + f.DefValue + "`"
}

func codes(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return strings.Join(out, ", ")
}

func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// CheckSection compares the part of the file at path between the lines
// "<!-- begin NAME -->" and "<!-- end NAME -->" with content. With update
// it rewrites that part instead; otherwise a difference is an error that
// says how to regenerate it (regen, a command line).
func CheckSection(path, name, content, regen string, update bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := []byte("<!-- begin "+name+" -->\n"), []byte("<!-- end "+name+" -->")
	i, j := bytes.Index(b, begin), bytes.Index(b, end)
	if i < 0 || j < i {
		return errors.New(path + " lacks the lines " + string(bytes.TrimSpace(begin)) + " and " + string(end))
	}
	i += len(begin)
	if string(b[i:j]) == content {
		return nil
	}
	if !update {
		return fmt.Errorf("%s is out of date for %s; regenerate it with\n\t%s", path, name, regen)
	}
	out := append(append(append([]byte{}, b[:i]...), content...), b[j:]...)
	return os.WriteFile(path, out, 0o644)
}
