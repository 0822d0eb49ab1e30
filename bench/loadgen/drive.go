package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DriveOptions configure a load run.
type DriveOptions struct {
	// Gateway is the base URL the requests go to (a gateway or a load
	// balancer in front of replicas).
	Gateway string
	// Token is the dashboard credential.
	Token string
	// Names are the connectors to load; each gets Rate requests a second.
	Names []string
	Rate  float64
	// Duration bounds the run; ctx may end it earlier. Requests already
	// sent are waited for either way.
	Duration time.Duration
	// Timeout bounds one request (0: 10 s). A request the gateway never
	// answers is an error of kind "timeout", never a hang.
	Timeout time.Duration
	// Conns is the client's connection pool to the gateway (0: 256).
	Conns int
	// MaxInFlight, when positive, bounds the requests outstanding at once.
	// A request due while the bound is reached is not sent and counts as
	// KindShed: when the offered load exceeds what the machine can carry,
	// the run says so instead of piling up goroutines until the harness
	// itself collapses. 0: no bound.
	MaxInFlight int
	// Observe, when set, sees every sample as it is recorded (from many
	// goroutines), so a caller can wait on progress while the run goes on.
	Observe func(Sample)
}

// Sample is one request: the connector it went to, when it started and
// ended, and its error kind ("" when it succeeded).
type Sample struct {
	Name       string
	Start, End time.Time
	Kind       string
}

// Latency is how long the request took.
func (s Sample) Latency() time.Duration { return s.End.Sub(s.Start) }

// Run is what a load run recorded.
type Run struct {
	Began, Ended time.Time
	Samples      []Sample
}

// Error kinds, besides "http-<status>".
const (
	KindTimeout   = "timeout"        // no answer within DriveOptions.Timeout
	KindRefused   = "conn-refused"   // nothing listened (the gateway is down)
	KindReset     = "conn-reset"     // the connection broke mid-request
	KindWrongBody = "wrong-body"     // 200 with another connector's answer
	KindTransport = "transport"      // any other client-side error
	KindBody      = "body-truncated" // the response body broke off
	// KindShed is a request the client did not send because
	// DriveOptions.MaxInFlight requests were already outstanding: the
	// offered load is beyond what this machine carries, gateway and
	// harness together.
	KindShed = "not-sent-client-saturated"
)

// Drive sends Rate requests a second to every connector, open loop (a slow
// answer does not delay the next request), each to GET
// /api/clients/<name>/load?seq=N, and checks every answer is that
// connector's. It returns when the duration is over (or ctx ends) and
// every request sent has finished.
func Drive(ctx context.Context, o DriveOptions) *Run {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Conns == 0 {
		o.Conns = 256
	}
	tr := &http.Transport{
		MaxConnsPerHost: o.Conns, MaxIdleConnsPerHost: o.Conns, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: o.Timeout}

	interval := time.Duration(float64(time.Second) / o.Rate)
	run := &Run{Began: time.Now()}
	end := run.Began.Add(o.Duration)
	var mu sync.Mutex
	record := func(s Sample) {
		mu.Lock()
		run.Samples = append(run.Samples, s)
		mu.Unlock()
		if o.Observe != nil {
			o.Observe(s)
		}
	}
	var requests sync.WaitGroup
	var schedulers sync.WaitGroup
	var slots chan struct{}
	if o.MaxInFlight > 0 {
		slots = make(chan struct{}, o.MaxInFlight)
	}
	for _, name := range o.Names {
		schedulers.Add(1)
		go func() {
			defer schedulers.Done()
			// A random phase, so the connectors' requests do not all start
			// on the same tick.
			next := run.Began.Add(time.Duration(rand.Int64N(int64(interval))))
			timer := time.NewTimer(time.Until(next))
			defer timer.Stop()
			for seq := 0; next.Before(end); seq++ {
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				if slots != nil {
					select {
					case slots <- struct{}{}:
					default:
						now := time.Now()
						record(Sample{Name: name, Start: now, End: now, Kind: KindShed})
						next = next.Add(interval)
						timer.Reset(time.Until(next))
						continue
					}
				}
				requests.Add(1)
				go func() {
					defer requests.Done()
					s := request(client, o, name, seq)
					if slots != nil {
						<-slots
					}
					record(s)
				}()
				next = next.Add(interval)
				timer.Reset(time.Until(next))
			}
		}()
	}
	schedulers.Wait()
	requests.Wait()
	run.Ended = time.Now()
	return run
}

func request(client *http.Client, o DriveOptions, name string, seq int) Sample {
	s := Sample{Name: name, Start: time.Now()}
	seqStr := strconv.Itoa(seq)
	req, _ := http.NewRequest(http.MethodGet, o.Gateway+"/api/clients/"+name+"/load?seq="+seqStr, nil)
	req.Header.Set("Authorization", "Bearer "+o.Token)
	resp, err := client.Do(req)
	if err != nil {
		s.End, s.Kind = time.Now(), classify(err)
		return s
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	s.End = time.Now()
	switch {
	case err != nil:
		s.Kind = classify(err)
		if s.Kind == KindTransport {
			s.Kind = KindBody
		}
	case resp.StatusCode != http.StatusOK:
		s.Kind = fmt.Sprintf("http-%d", resp.StatusCode)
	case string(body) != ExpectedBody(name, seqStr):
		s.Kind = KindWrongBody
	}
	return s
}

func classify(err error) string {
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return KindReset
	default:
		return KindTransport
	}
}
