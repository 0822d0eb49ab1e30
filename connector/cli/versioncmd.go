package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/shared/version"
)

func (a *app) versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  exactArgs(0, 0, "", "version takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			info := version.Current()
			if asJSON {
				return writeJSON(a.out(), info)
			}
			fmt.Fprintf(a.out(), "uncaged-workflow %s", info.Version)
			if info.Commit != "" {
				fmt.Fprintf(a.out(), " (%s)", info.Commit)
			}
			fmt.Fprintf(a.out(), " %s\n", info.GoVersion)
			return nil
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}
