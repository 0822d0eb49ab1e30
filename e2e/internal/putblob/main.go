// Command putblob stores its standard input as a content node in the CAS
// of the storage root it is given and prints the node's hash. The e2e
// tests build it with the binaries: a 50 MiB node written by the test
// process itself, under the race detector, takes seconds, and neither the
// CLI (argv) nor the API (1 MiB bodies) takes one that large.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: putblob ROOT < payload")
		os.Exit(2)
	}
	payload, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "putblob:", err)
		os.Exit(1)
	}
	h, err := cas.Open(storage.Layout{Root: os.Args[1]}.CASDir()).PutNode(node.NewContent(string(payload), nil))
	if err != nil {
		fmt.Fprintln(os.Stderr, "putblob:", err)
		os.Exit(1)
	}
	fmt.Println(h)
}
