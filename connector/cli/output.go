package cli

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// writeJSON prints v as two-space indented JSON, as `--json` and
// `thread show` do.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// listFlags are --json, --limit and --offset, shared by every list command.
type listFlags struct {
	json   bool
	limit  int
	offset int
}

func (f *listFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON instead of lines")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "print at most N items (0: all)")
	cmd.Flags().IntVar(&f.offset, "offset", 0, "skip the first N items")
}

func (f *listFlags) check() error {
	if f.limit < 0 {
		return errors.New("--limit must be a non-negative integer")
	}
	if f.offset < 0 {
		return errors.New("--offset must be a non-negative integer")
	}
	return nil
}

// jsonFlag registers --json on a show command.
func jsonFlag(cmd *cobra.Command, dst *bool) {
	cmd.Flags().BoolVar(dst, "json", false, "print JSON")
}
