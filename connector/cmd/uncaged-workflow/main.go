// Command uncaged-workflow is the connector: the workflow engine CLI that
// runs on each machine.
package main

import (
	"os"

	"github.com/uncaged/workflow/connector/cli"
	"github.com/uncaged/workflow/shared/profiling"
)

func main() {
	stopProfile := profiling.Start()
	code := cli.Run(os.Args[1:], cli.Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
	})
	stopProfile()
	os.Exit(code)
}
