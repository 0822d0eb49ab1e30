// Command uncaged-workflow is the connector: the workflow engine CLI that
// runs on each machine.
package main

import (
	"os"

	"github.com/uncaged/workflow/connector/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], cli.Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
	}))
}
