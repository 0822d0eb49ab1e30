package cli

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/uncaged/workflow/engine/registry"
)

// Typing mistakes get the answer gh and kubectl users expect: one line that
// names what was not understood and the nearest thing that exists, then
// where to look. Never the whole usage: it pushes the one useful line off
// the screen.

// suggestionDistance is how many single-letter edits a typo may be from
// what was meant: "runn" and "rnu" find "run", "aproved" finds "approved".
const suggestionDistance = 2

// closest is the candidate nearest to typed, ignoring case: within
// suggestionDistance edits, or one that starts with what was typed (a name
// cut short). Ties go to the earlier candidate, so callers list what they
// prefer first. ok is false when nothing is near enough to be a likely
// meaning.
func closest(typed string, candidates []string) (best string, ok bool) {
	typed = strings.ToLower(typed)
	if typed == "" {
		return "", false
	}
	bestScore := -1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		score := editDistance(typed, lc)
		switch {
		case score <= suggestionDistance:
		case strings.HasPrefix(lc, typed) && len(typed) >= 2:
			// A prefix ranks after every near typo: "wor" is "workflow".
			score = suggestionDistance + 1
		default:
			continue
		}
		if bestScore < 0 || score < bestScore {
			best, bestScore = c, score
		}
	}
	// A one- or two-letter word is within two edits of every short name;
	// suggesting "rm" for "ps" would be noise, not help.
	if bestScore >= len(typed) && !strings.HasPrefix(strings.ToLower(best), typed) {
		return "", false
	}
	return best, bestScore >= 0
}

// editDistance is the Levenshtein distance between a and b, in bytes (names
// here are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is ` (did you mean "x"?)` when a candidate is near typed, else
// nothing.
func didYouMean(typed string, candidates []string) string {
	if best, ok := closest(typed, candidates); ok {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// helpHint is the line that follows a usage error: where the right
// spelling can be found.
func helpHint(cmd *cobra.Command) string {
	what := "its flags"
	if len(visible(cmd)) > 0 {
		what = "its commands"
	}
	if !cmd.HasParent() {
		what = "the list of commands"
	}
	return fmt.Sprintf("Run '%s --help' for %s.", cmd.CommandPath(), what)
}

// unknownCommand is the error for a word that names no subcommand of cmd.
func unknownCommand(cmd *cobra.Command, typed string) error {
	var names []string
	for _, s := range visible(cmd) {
		names = append(names, s.Name())
		names = append(names, s.Aliases...)
		names = append(names, s.SuggestFor...)
	}
	msg := fmt.Sprintf("unknown command %q for %q", typed, cmd.CommandPath())
	// A subcommand typed without its group (`kill` for "thread kill") is
	// a surer guess than any near spelling.
	if path := nestedCommand(cmd, typed); path != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", path)
	} else if best, ok := closest(typed, names); ok {
		// An alias or SuggestFor word stands for its command.
		if s, _, err := cmd.Find([]string{best}); err == nil && s != cmd {
			best = s.Name()
		}
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return usageError{msg: msg, hint: helpHint(cmd)}
}

// nestedCommand finds typed one level down, for a subcommand given without
// its group (`ps` is "thread ps"); "" when no group has it.
func nestedCommand(cmd *cobra.Command, typed string) string {
	for _, g := range visible(cmd) {
		for _, s := range visible(g) {
			if s.Name() == typed || slices.Contains(s.Aliases, typed) {
				return g.Name() + " " + s.Name()
			}
		}
	}
	return ""
}

// usageError is a command line that was not understood: a one-line reason
// and a hint, printed on stderr with exit code 1 like every other error.
type usageError struct{ msg, hint string }

func (e usageError) Error() string { return e.msg + "\n" + e.hint }

// flagError turns a flag the command does not know into a suggestion of the
// nearest one it does, and adds the help hint to every flag error. On a
// command with subcommands an unknown flag usually means the subcommand
// itself was mistyped (`thread lst --json`): that is reported instead.
func flagError(args []string) func(*cobra.Command, error) error {
	return func(cmd *cobra.Command, err error) error {
		if len(visible(cmd)) > 0 {
			if word := firstWordAfter(cmd, args); word != "" {
				return unknownCommand(cmd, word)
			}
		}
		msg := err.Error()
		var missing *pflag.NotExistError
		if errors.As(err, &missing) && missing.GetSpecifiedShortnames() == "" {
			var names []string
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if !f.Hidden {
					names = append(names, f.Name)
				}
			})
			sort.Strings(names)
			if best, ok := closest(missing.GetSpecifiedName(), names); ok {
				msg += fmt.Sprintf(" (did you mean --%s?)", best)
			} else if s, _, err := cmd.Find([]string{missing.GetSpecifiedName()}); err == nil && s != cmd {
				// --version where a version command is meant.
				msg += fmt.Sprintf(" (did you mean %q?)", s.CommandPath())
			}
		}
		return usageError{msg: msg, hint: helpHint(cmd)}
	}
}

// firstWordAfter is the first argument after cmd's own path that is neither
// a flag nor a known flag's value: the subcommand a person meant to type.
func firstWordAfter(cmd *cobra.Command, args []string) string {
	depth := 0
	for c := cmd; c.HasParent(); c = c.Parent() {
		depth++
	}
	seen := 0
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return ""
		}
		if strings.HasPrefix(arg, "-") {
			if takesSeparateValue(cmd.Flags(), arg) {
				i++
			}
			continue
		}
		if seen == depth {
			return arg
		}
		seen++
	}
	return ""
}

// takesSeparateValue says whether arg is a known flag whose value is the
// next argument (`--storage-root /x`, not `--storage-root=/x` or `--json`).
func takesSeparateValue(flags *pflag.FlagSet, arg string) bool {
	if strings.Contains(arg, "=") {
		return false
	}
	var f *pflag.Flag
	if name, long := strings.CutPrefix(arg, "--"); long {
		f = flags.Lookup(name)
	} else if len(arg) == 2 {
		f = flags.ShorthandLookup(arg[1:])
	}
	return f != nil && f.NoOptDefVal == ""
}

// workflowListHint points at the list of names a person can use.
const workflowListHint = "see `uncaged-workflow workflow list`"

// unknownWorkflow is the error for a workflow name the registry lacks
// (wording: "workflow not registered" or "workflow not found", kept from
// the original per command): the nearest registered name, and where the
// names are listed.
func unknownWorkflow(wording string, reg *registry.Registry, name string) error {
	return fmt.Errorf("%s: %s%s\n%s", wording, name, didYouMean(name, reg.Names()), workflowListHint)
}
