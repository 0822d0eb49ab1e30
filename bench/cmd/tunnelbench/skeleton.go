package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// The design skeleton is the least the tunnel's design asks for, with
// nothing of ours: a net/http server whose handler is an
// httputil.ReverseProxy over an x/net/http2 ClientConn, on a plain TCP
// connection (no WebSocket) to an http2.Server whose handler answers like
// the bare floor does. No router, auth, request log, metrics or request
// ids. What it costs per request, and the throughput it reaches against
// the bare server, bound what any implementation of the design can reach
// on the machine the benchmark runs on.

// The skeleton uses the HTTP/2 tuning the real tunnel uses, so the skeleton
// differs from it only by what it leaves out.
const (
	skeletonHeaderTable = 1
	skeletonFrameSize   = 256 << 10
)

// serveSkeletonGateway connects to the skeleton connector on tunnelAddr
// (which side dials makes no difference to the cost per request) and
// proxies every request on httpAddr to it.
func serveSkeletonGateway(httpAddr, tunnelAddr string) {
	var conn net.Conn
	var err error
	for range 1000 {
		if conn, err = net.Dial("tcp", tunnelAddr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	check(err)
	t := &http2.Transport{AllowHTTP: true, DisableCompression: true,
		MaxEncoderHeaderTableSize: skeletonHeaderTable, MaxDecoderHeaderTableSize: skeletonHeaderTable,
		MaxReadFrameSize: skeletonFrameSize}
	cc, err := t.NewClientConn(conn)
	check(err)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "connector"
		},
		Transport:  cc,
		BufferPool: &skeletonBuffers{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}},
	}
	check(http.ListenAndServe(httpAddr, proxy))
}

// serveSkeletonConnector takes the skeleton gateway's connection on
// tunnelAddr and serves HTTP/2 on it with the floor's handler.
func serveSkeletonConnector(tunnelAddr string) {
	ln, err := net.Listen("tcp", tunnelAddr)
	check(err)
	conn, err := ln.Accept()
	check(err)
	ln.Close()
	srv := &http2.Server{MaxConcurrentStreams: 250,
		MaxEncoderHeaderTableSize: skeletonHeaderTable, MaxDecoderHeaderTableSize: skeletonHeaderTable}
	srv.ServeConn(conn, &http2.ServeConnOpts{Context: context.Background(), Handler: floorHandler()})
}

type skeletonBuffers struct{ p sync.Pool }

func (b *skeletonBuffers) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *skeletonBuffers) Put(x []byte) { b.p.Put(&x) }
