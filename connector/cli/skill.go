package cli

import (
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/jsrt"
)

//go:embed skills/*.md
var skillFS embed.FS

// skillTopic is one document `skill` prints.
type skillTopic struct {
	name, summary string
}

// skillTopics are the documents, in index order.
var skillTopics = []skillTopic{
	{"cli", "Full CLI command reference"},
	{"develop", "Guide for agents executing roles inside a workflow"},
	{"author", "Guide for building and publishing workflow bundles"},
}

// commandsMarker is where the cli document gets its generated command
// tables, so the reference always matches the commands this binary has.
const commandsMarker = "{{commands}}\n"

// modulesMarker is where the author document lists the Node built-ins the
// engine provides, taken from the engine so the list cannot go stale.
const modulesMarker = "{{modules}}"

// builtinModules renders the importable Node built-ins as `node:x` items.
func builtinModules() string {
	var items []string
	for _, m := range jsrt.AvailableModules() {
		if !strings.HasPrefix(m, "@") { // the @uncaged/* packages are not Node built-ins
			items = append(items, "`node:"+m+"`")
		}
	}
	return strings.Join(items, ", ")
}

func (a *app) skillCmd() *cobra.Command {
	return &cobra.Command{
		Use:         "skill [topic]",
		Short:       "Agent-consumable docs (cli, develop, author)",
		Annotations: map[string]string{groupAnnotation: "Reference:"},
		Args:        exactArgs(0, 1, "", "skill takes at most one topic"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(a.out(), skillIndex())
				return nil
			}
			doc, err := skillDoc(args[0], cmd.Root())
			if err != nil {
				fmt.Fprintf(a.env.Stderr, "%s\n\n%s", err, skillIndex())
				return exitError{1}
			}
			fmt.Fprint(a.out(), doc)
			return nil
		},
	}
}

// skillIndex lists the topics.
func skillIndex() string {
	var b strings.Builder
	b.WriteString("# uncaged-workflow skill\n\n")
	b.WriteString("Documentation written for agents (and people) working with uncaged-workflow.\n\n")
	b.WriteString("Usage: `uncaged-workflow skill <topic>`\n\n")
	b.WriteString("| Topic | Description |\n|-------|-------------|\n")
	for _, t := range skillTopics {
		fmt.Fprintf(&b, "| `%s` | %s |\n", t.name, t.summary)
	}
	return b.String()
}

// skillDoc returns a topic's document; root supplies the command tables of
// the cli topic.
func skillDoc(topic string, root *cobra.Command) (string, error) {
	known := false
	for _, t := range skillTopics {
		known = known || t.name == topic
	}
	if !known {
		return "", fmt.Errorf("unknown skill topic: %s", topic)
	}
	b, err := skillFS.ReadFile("skills/" + topic + ".md")
	if err != nil {
		return "", errors.New("skill document missing from this build: " + topic)
	}
	doc := string(b)
	doc = strings.Replace(doc, commandsMarker, commandTables(root), 1)
	return strings.ReplaceAll(doc, modulesMarker, builtinModules()), nil
}

// docOrder is the order of the command sections: the original's groups
// first, everything else after them alphabetically.
var docOrder = []string{"workflow", "thread", "cas", "init", "build", "setup", "skill", "connect"}

// commandTables renders every visible command as markdown tables: one
// section per group, the shortcuts together, and one per other command.
func commandTables(root *cobra.Command) string {
	// A "|" inside a cell would end it.
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	row := func(name string, c *cobra.Command) string {
		args := strings.TrimSpace(strings.TrimPrefix(c.Use, c.Name()))
		if args == "" {
			args = "(none)"
		} else {
			args = "`" + cell(args) + "`"
		}
		return fmt.Sprintf("| `%s` | %s | %s |", name, args, cell(c.Short))
	}
	rank := func(c *cobra.Command) int {
		if i := slices.Index(docOrder, c.Name()); i >= 0 {
			return i
		}
		return len(docOrder)
	}
	cmds := slices.Clone(root.Commands())
	slices.SortStableFunc(cmds, func(x, y *cobra.Command) int { return rank(x) - rank(y) })

	const header = "| Command | Args | Description |\n|---------|------|-------------|\n"
	var sections, shortcuts []string
	for _, c := range cmds {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Annotations[groupAnnotation] == "Shortcuts:" {
			shortcuts = append(shortcuts, fmt.Sprintf("| `%s` | `thread %s` | %s |", c.Name(), c.Name(), shortcutMeaning(c)))
			continue
		}
		subs := visible(c)
		var rows []string
		if len(subs) == 0 {
			rows = append(rows, row(c.Name(), c))
		}
		for _, s := range subs {
			rows = append(rows, row(c.Name()+" "+s.Name(), s))
		}
		sections = append(sections, fmt.Sprintf("### %s\n\n%s%s\n", c.Name(), header, strings.Join(rows, "\n")))
	}
	if len(shortcuts) > 0 {
		sections = append(sections, "### Top-level shortcuts\n\n| Shortcut | Same as | Description |\n|----------|---------|-------------|\n"+strings.Join(shortcuts, "\n")+"\n")
	}
	return strings.Join(sections, "\n") + "\n"
}

func shortcutMeaning(c *cobra.Command) string {
	switch c.Name() {
	case "run":
		return "Shortcut to start a thread"
	case "live":
		return "Shortcut to attach to a thread"
	}
	return c.Short
}
