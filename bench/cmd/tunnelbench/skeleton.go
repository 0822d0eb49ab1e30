package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"

	"github.com/uncaged/workflow/shared/tunnel"
)

// The design skeleton is the least the tunnel's design asks for, with
// nothing of ours on top: a net/http server whose handler is an
// httputil.ReverseProxy over an x/net/http2 client connection to an
// http2.Server whose handler answers like the bare floor does. No router,
// auth, request log, metrics or request ids. It runs over one of two
// carriers:
//
//   - "tcp": a plain TCP connection, and the HTTP/2 tuning the tunnel uses.
//     What this costs, and the throughput it reaches against the bare
//     server, bound what any implementation of the design can reach on the
//     machine the benchmark runs on.
//   - "websocket": the tunnel package itself (tunnel.Accept/NewClient on one
//     side, tunnel.Dial/Serve on the other), so the difference between the
//     two is what the WebSocket carrier adds, and the difference between
//     this and the real gateway and connector is what their routing, auth,
//     logging and metrics add.
const (
	carrierTCP       = "tcp"
	carrierWebSocket = "websocket"
)

// The tcp skeleton's HTTP/2 tuning, as in shared/tunnel.
const (
	skeletonHeaderTable = 1
	skeletonFrameSize   = 256 << 10
)

// serveSkeletonGateway takes the skeleton connector's connection on
// tunnelAddr (for tcp it dials the connector: which side dials makes no
// difference to the cost per request) and proxies every request on
// httpAddr to it.
func serveSkeletonGateway(carrier, httpAddr, tunnelAddr string) {
	var transport http.RoundTripper
	switch carrier {
	case carrierTCP:
		conn := retry(func() (net.Conn, error) { return net.Dial("tcp", tunnelAddr) })
		//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
		t := &http2.Transport{AllowHTTP: true, DisableCompression: true, MaxEncoderHeaderTableSize: skeletonHeaderTable, MaxDecoderHeaderTableSize: skeletonHeaderTable, MaxReadFrameSize: skeletonFrameSize}
		//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
		cc, err := t.NewClientConn(conn)
		check(err)
		transport = cc
	case carrierWebSocket:
		clients := make(chan *tunnel.Client, 1)
		go func() {
			check(http.ListenAndServe(tunnelAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := tunnel.Accept(w, r)
				check(err)
				c, err := tunnel.NewClient(ws)
				check(err)
				clients <- c
			})))
		}()
		transport = <-clients
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "connector"
		},
		Transport:  transport,
		BufferPool: &copyBuffers{},
	}
	check(http.ListenAndServe(httpAddr, proxy))
}

// serveSkeletonConnector serves HTTP/2 with the floor's handler on the
// skeleton gateway's connection.
func serveSkeletonConnector(carrier, tunnelAddr string) {
	switch carrier {
	case carrierTCP:
		ln, err := net.Listen("tcp", tunnelAddr)
		check(err)
		conn, err := ln.Accept()
		check(err)
		check(ln.Close())
		//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
		srv := &http2.Server{MaxConcurrentStreams: 250, MaxEncoderHeaderTableSize: skeletonHeaderTable, MaxDecoderHeaderTableSize: skeletonHeaderTable}
		//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
		srv.ServeConn(conn, &http2.ServeConnOpts{Context: context.Background(), Handler: floorHandler()})
	case carrierWebSocket:
		ws := retry(func() (*websocket.Conn, error) {
			return tunnel.Dial(context.Background(), "http://"+tunnelAddr, "skeleton", "", nil)
		})
		check(tunnel.Serve(context.Background(), ws, floorHandler(), tunnel.ServeOptions{}))
	}
}

// retry dials until the other side has started.
func retry[T any](dial func() (T, error)) T {
	var c T
	var err error
	for range 1000 {
		if c, err = dial(); err == nil {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	check(err)
	return c
}

// copyBuffers lends the skeleton's ReverseProxy reusable 32 KiB copy
// buffers, as the gateway's proxies have, so the floor does not pay for
// allocations the gateway avoids.
type copyBuffers struct{ pool sync.Pool }

func (c *copyBuffers) Get() []byte {
	if b, ok := c.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (c *copyBuffers) Put(b []byte) { c.pool.Put(&b) }
