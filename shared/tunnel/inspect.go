package tunnel

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/net/http2"
)

// The gateway's HTTP/2 client answers every PING a connector sends and
// acknowledges every SETTINGS, each with a write of its own: a connector
// that floods them costs the gateway a good part of a core and can fill
// the way back. An honest connector sends one SETTINGS when it starts and
// no PING at all (it pings at the WebSocket level), so the bucket below is
// generous: controlBurst at once, controlRate a second after that.
const (
	controlBurst = 100
	controlRate  = 10
)

// errControlFlood is the cause given when a connector exceeds the bucket.
var errControlFlood = errors.New("tunnel: too many PING or SETTINGS frames from the connector")

// frameInspector follows the HTTP/2 frames a connector sends on the
// gateway's read side — only their 9-byte headers, skipping each payload
// by its length, never copying or reframing it — and counts the PING and
// SETTINGS frames that ask for an answer. It sees the bytes exactly as the
// HTTP/2 framer reads them (the server side of a connection sends no
// preface), so the two never disagree on where a frame starts.
//
// One goroutine (the HTTP/2 client's reader) calls inspect.
type frameInspector struct {
	// skip is how much of the current frame's payload is still to come.
	skip int
	// hdr holds a frame header split across reads, nhdr its bytes so far.
	hdr  [9]byte
	nhdr int

	tokens float64
	at     time.Time // of the last refill; zero: the bucket is full
	// now is the clock (nil: time.Now), a test's own.
	now func() time.Time
}

// inspect follows p, the next bytes read; it returns an error once the
// connector has sent more PING or SETTINGS frames than the bucket allows.
func (f *frameInspector) inspect(p []byte) error {
	for len(p) > 0 {
		if f.skip > 0 {
			n := min(f.skip, len(p))
			f.skip -= n
			p = p[n:]
			continue
		}
		var h []byte
		if f.nhdr == 0 && len(p) >= len(f.hdr) {
			h, p = p[:len(f.hdr)], p[len(f.hdr):]
		} else {
			n := copy(f.hdr[f.nhdr:], p)
			f.nhdr += n
			p = p[n:]
			if f.nhdr < len(f.hdr) {
				return nil
			}
			f.nhdr = 0
			h = f.hdr[:]
		}
		f.skip = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags := http2.FrameType(h[3]), http2.Flags(h[4])
		// ACKs answer the gateway's own PING and SETTINGS (the same flag
		// bit for both) and cost it nothing to receive.
		if (typ == http2.FramePing || typ == http2.FrameSettings) && !flags.Has(http2.FlagPingAck) {
			if err := f.take(typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// take takes a token from the bucket for one frame of type typ.
func (f *frameInspector) take(typ http2.FrameType) error {
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	t := now()
	if f.at.IsZero() {
		f.tokens = controlBurst
	} else {
		f.tokens = min(controlBurst, f.tokens+t.Sub(f.at).Seconds()*controlRate)
	}
	f.at = t
	if f.tokens < 1 {
		return fmt.Errorf("%w: a %v frame over the limit of %d at once and %d a second", errControlFlood, typ, controlBurst, controlRate)
	}
	f.tokens--
	return nil
}
