package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Some arguments are free content: `cas put "- dash"` stores "- dash", as
// the original does, which took such an argument verbatim. The flag parser
// would read anything starting with '-' as a flag and refuse it, so
// commands with such an argument parse their command line themselves
// (contentArgs): an argument is a flag only when it names one of the
// command's flags (its own, --help, the root's); everything else is
// content. Flags keep working before and after the content, and "--"
// still ends the flags ("cas put -- --help" stores "--help"). A lone "--"
// with no content after it is the content ("cas put --" stores "--").

// contentArgs is the Args of a command whose positional arguments are free
// content; the command sets DisableFlagParsing. It parses the known flags
// into cmd.Flags() (so the root's flags and variables apply as for any
// command), stores the rest in *positional, and checks them with check.
// The command's RunE must read *positional, not its args.
func contentArgs(positional *[]string, check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		cmd.InheritedFlags() // merges the root's persistent flags into cmd.Flags()
		fs := cmd.Flags()
		var flags, rest []string
		for i := 0; i < len(args); i++ {
			arg := args[i]
			switch {
			case arg == "--" && i == len(args)-1 && len(rest) == 0:
				rest = append(rest, arg)
			case arg == "--":
				rest = append(rest, args[i+1:]...)
				i = len(args)
			case namesFlag(fs, arg):
				flags = append(flags, arg)
				if takesSeparateValue(fs, arg) && i+1 < len(args) {
					i++
					flags = append(flags, args[i])
				}
			default:
				rest = append(rest, arg)
			}
		}
		if err := fs.Parse(flags); err != nil {
			return cmd.FlagErrorFunc()(cmd, err)
		}
		if help, _ := fs.GetBool("help"); help {
			return pflag.ErrHelp
		}
		*positional = rest
		if err := check(cmd, rest); err != nil {
			return withFlagHint(err, fs, rest)
		}
		return nil
	}
}

// withFlagHint adds to a refused command line what a mistyped flag among
// its arguments was likely meant to be: taken for content, it only made
// the arguments too many.
func withFlagHint(err error, fs *pflag.FlagSet, args []string) error {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	for _, arg := range args {
		name, ok := strings.CutPrefix(arg, "--")
		name, _, _ = strings.Cut(name, "=")
		if !ok || name == "" {
			continue
		}
		if best, ok := closest(name, names); ok {
			return fmt.Errorf("%w (%s is not a flag here: did you mean --%s?)", err, arg, best)
		}
	}
	return err
}

// namesFlag says whether arg is one of fs's flags as written on a command
// line: "--name", "--name=value", "-x" or "-x=value".
func namesFlag(fs *pflag.FlagSet, arg string) bool {
	if name, long := strings.CutPrefix(arg, "--"); long {
		name, _, _ = strings.Cut(name, "=")
		return name != "" && fs.Lookup(name) != nil
	}
	short, ok := strings.CutPrefix(arg, "-")
	if !ok || short == "" {
		return false
	}
	short, _, _ = strings.Cut(short, "=")
	return len(short) == 1 && fs.ShorthandLookup(short) != nil
}
