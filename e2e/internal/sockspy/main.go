// Command sockspy plays, in the e2e tests, the parts another user of the
// machine could play on a Unix socket: a server standing where an engine
// host should, which notes what each connection sends it and answers
// nothing, or a client that checks nothing before it sends.
//
//	sockspy serve SOCKET
//	sockspy request SOCKET METHOD PATH [BODY]
//
// serve prints "listening" once it listens, then one line per
// connection, in the order they came: `connection N: nothing` or
// `connection N: "<what its first read returned>"`. It reads one
// connection at a time, so a line for a marker sent last means every
// earlier connection has been read. request prints the answer's status
// code and body.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "serve":
		serve(os.Args[2])
	case (len(os.Args) == 5 || len(os.Args) == 6) && os.Args[1] == "request":
		body := ""
		if len(os.Args) == 6 {
			body = os.Args[5]
		}
		request(os.Args[2], os.Args[3], os.Args[4], body)
	default:
		fmt.Fprintln(os.Stderr, "usage: sockspy serve SOCKET | sockspy request SOCKET METHOD PATH [BODY]")
		os.Exit(2)
	}
}

func serve(sock string) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fail(err)
	}
	// Tests move the file into place; the listener must not remove it.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(sock, 0o777); err != nil {
		fail(err)
	}
	fmt.Println("listening")
	buf := make([]byte, 64<<10)
	for n := 1; ; n++ {
		c, err := ln.Accept()
		if err != nil {
			fail(err)
		}
		k, _ := c.Read(buf)
		_ = c.Close() // nothing to answer
		if k == 0 {
			fmt.Printf("connection %d: nothing\n", n)
		} else {
			fmt.Printf("connection %d: %q\n", n, buf[:k])
		}
	}
}

func request(sock, method, path, body string) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequest(method, "http://engine"+path, strings.NewReader(body))
	if err != nil {
		fail(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%d\n%s", resp.StatusCode, b)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sockspy:", err)
	os.Exit(1)
}
