// Package version identifies a build of the connector and the gateway.
package version

import "runtime/debug"

// Version is the release version, set at build time with
// -ldflags "-X github.com/uncaged/workflow/shared/version.Version=v1.2.3".
var Version = "dev"

// Info is what `version --json` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Current describes the running binary, with the VCS commit when the build
// recorded one.
func Current() Info {
	info := Info{Version: Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.Commit = s.Value
			}
		}
	}
	return info
}
