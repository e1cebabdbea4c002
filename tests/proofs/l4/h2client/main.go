// Command h2client is the load of the L4 rolling-update proof (python3 tests/proofs rolling_restart_l4):
// a few independent client transports, as several kubelets or controllers would hold, each
// multiplexing the requests of several workers over few long-lived connections.
//
// Protocols:
//
//	h2c    golang.org/x/net/http2's Transport (the one client-go uses) with prior knowledge over
//	       plain TCP; one transport keeps one connection while the server lets it.
//	http1  net/http's Transport with keep-alive, HTTP/2 off, at most -http1-conns connections.
//	h2-tls     h2c's transport over TLS (crypto/tls, ALPN offering only h2).
//	http1-tls  http1's transport over TLS (ALPN offering only http/1.1).
//	oneshot    new connections at a steady -rate per second, one HTTP/1.1 request each
//	           (net/http with DisableKeepAlives: a fresh dial per request, `Connection: close`),
//	           at most -max-in-flight at once; attempted and achieved_rate say whether the
//	           rate held.
//
// With every protocol, each failed request is classified in the JSON's failure_kinds: refused,
// reset (ECONNRESET/EPIPE), eof (closed before the whole response), timeout, addrnotavail (no
// local port left), "status NNN", other; failure_examples holds the first of each kind.
//
// Over TLS the server is verified against -cacert (PEM) with the server name -server-name
// (default: the host of -addr, an IP address matched against the certificate's IP SANs), and
// a connection whose negotiated ALPN protocol is not the one offered is a failed dial (counted
// in the JSON's alpn map by what was negotiated).
//
// Every connection is watched: for HTTP/2 the frames the server sends are parsed far enough to
// see its GOAWAYs; for both protocols the client notes whether the server closed the
// connection (EOF or an error on read before the client closed it). The totals are in the JSON
// line (goaway_conns, peer_closed, peer_closed_without_goaway); with -conn-log FILE one JSON
// line per connection (local port, dial, first GOAWAY and end as Unix milliseconds, who ended
// it) is written there at the end, so the driver can match the connections HAProxy had pinned
// to a pod when it was told to stop.
//
// An answer that client-go would retry (429 or 5xx carrying Retry-After in seconds: client-go's
// checkWait) is retried after its Retry-After, at most -max-retries times (client-go's default
// is 10); the retries are counted by status. The transports' own retries stay: net/http retries an idempotent request
// that a reused keep-alive connection lost before any answer, and the http2 transport retries
// a request refused by GOAWAY (stream id above the last one the server will process) on a
// new connection. Every other error, and any non-2xx answer after the retries, is a failure.
//
// The load runs until SIGINT or SIGTERM (or -duration); the workers finish the request they
// are in, then one JSON line is printed on stdout. Built by the driver in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o h2client .
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// connRecord is one connection's story, as the client saw it.
type connRecord struct {
	mu        sync.Mutex
	port      int
	dialMs    int64
	goawayMs  int64 // first GOAWAY frame received (0: none)
	goaways   int
	endMs     int64  // end of the connection (0: still open)
	endedBy   string // "peer" (EOF or error on read first) or "client"
	alpn      string
	transport int
}

type connLog struct {
	mu    sync.Mutex
	conns []*connRecord
}

func (l *connLog) add(r *connRecord) {
	l.mu.Lock()
	l.conns = append(l.conns, r)
	l.mu.Unlock()
}

func nowMs() int64 { return time.Now().UnixNano() / int64(time.Millisecond) }

// watchedConn notes the server's GOAWAY frames (HTTP/2 only: the server-to-client byte stream
// is a sequence of frames from its first byte) and who ended the connection.
type watchedConn struct {
	net.Conn
	rec   *connRecord
	h2    bool
	hdr   [9]byte
	hdrN  int
	skip  uint32 // payload bytes of the current frame still to pass
	close sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.h2 {
		c.scan(p[:n])
	}
	if err != nil {
		c.end("peer")
	}
	return n, err
}

func (c *watchedConn) scan(b []byte) {
	for len(b) > 0 {
		if c.skip > 0 {
			k := uint32(len(b))
			if k > c.skip {
				k = c.skip
			}
			c.skip -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.hdrN:], b)
		c.hdrN += k
		b = b[k:]
		if c.hdrN < len(c.hdr) {
			return
		}
		c.hdrN = 0
		c.skip = uint32(c.hdr[0])<<16 | uint32(c.hdr[1])<<8 | uint32(c.hdr[2])
		if c.hdr[3] == 0x7 { // GOAWAY
			c.rec.mu.Lock()
			if c.rec.goawayMs == 0 {
				c.rec.goawayMs = nowMs()
			}
			c.rec.goaways++
			c.rec.mu.Unlock()
		}
	}
}

func (c *watchedConn) end(by string) {
	c.close.Do(func() {
		c.rec.mu.Lock()
		c.rec.endMs = nowMs()
		c.rec.endedBy = by
		c.rec.mu.Unlock()
	})
}

func (c *watchedConn) Close() error {
	c.end("client")
	return c.Conn.Close()
}

type counters struct {
	ok, failed, dials int64
	dialErrors        int64 // TCP connect or TLS handshake (ALPN included) failed
	mu                sync.Mutex
	retries           map[string]int64
	alpn              map[string]int64
}

func (c *counters) negotiated(proto string) {
	c.mu.Lock()
	c.alpn[proto]++
	c.mu.Unlock()
}

func (c *counters) retried(status int) {
	c.mu.Lock()
	c.retries[strconv.Itoa(status)]++
	c.mu.Unlock()
}

type transportResult struct {
	OK      int64            `json:"ok"`
	Failed  int64            `json:"failed"`
	Retries map[string]int64 `json:"retries"`
	Dials   int64            `json:"dials"`
}

type result struct {
	Protocol     string            `json:"protocol"`
	TLS          bool              `json:"tls"`
	ALPN         map[string]int64  `json:"alpn"`
	GoawayConns  int64             `json:"goaway_conns"`
	PeerClosed   int64             `json:"peer_closed"`
	PeerNoGoaway int64             `json:"peer_closed_without_goaway"`
	OpenAtEnd    int64             `json:"open_at_end"`
	DialErrors   int64             `json:"dial_errors"`
	DialErrTexts []string          `json:"dial_error_texts"`
	Transports   int               `json:"transports"`
	Workers      int               `json:"workers_per_transport"`
	ElapsedS     float64           `json:"elapsed_s"`
	OK           int64             `json:"ok"`
	Failed       int64             `json:"failed"`
	Retries      map[string]int64  `json:"retries"`
	Dials        int64             `json:"dials"`
	Errors       []string          `json:"errors"`
	PerTransport []transportResult `json:"per_transport"`
	// failure_kinds, failure_examples: every protocol (when a request failed); the others: oneshot.
	Rate            int               `json:"rate,omitempty"`
	Attempted       int64             `json:"attempted,omitempty"`
	AchievedRate    float64           `json:"achieved_rate,omitempty"`
	MaxInFlight     int64             `json:"max_in_flight,omitempty"`
	FailureKinds    map[string]int64  `json:"failure_kinds,omitempty"`
	FailureExamples map[string]string `json:"failure_examples,omitempty"`
}

// errorLog keeps the first few failure texts.
type errorLog struct {
	mu   sync.Mutex
	keep int
	errs []string
}

func (l *errorLog) add(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < l.keep {
		l.errs = append(l.errs, msg)
	}
}

// clientOptions are what every transport of one run shares.
type clientOptions struct {
	proto      string
	timeout    time.Duration
	http1Conns int
	tls        *tls.Config // nil: plaintext
	conns      *connLog
	dialErrs   *errorLog
}

func newClient(o clientOptions, c *counters, t int) (*http.Client, error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	h2 := o.proto == "h2c" || o.proto == "h2-tls"
	var dialWatched func(ctx context.Context, network, addr string) (net.Conn, error)
	// dial opens one watched connection: TCP, then (over TLS) the handshake, verified and
	// required to have negotiated the protocol offered.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialWatched(ctx, network, addr)
		if err != nil {
			atomic.AddInt64(&c.dialErrors, 1)
			o.dialErrs.add(err.Error())
		}
		return conn, err
	}
	dialWatched = func(ctx context.Context, network, addr string) (net.Conn, error) {
		atomic.AddInt64(&c.dials, 1)
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		rec := &connRecord{dialMs: nowMs(), transport: t}
		if a, ok := raw.LocalAddr().(*net.TCPAddr); ok {
			rec.port = a.Port
		}
		conn := raw
		if o.tls != nil {
			tc := tls.Client(raw, o.tls)
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := tc.HandshakeContext(hctx)
			cancel()
			if err != nil {
				raw.Close()
				return nil, fmt.Errorf("TLS handshake: %w", err)
			}
			got := tc.ConnectionState().NegotiatedProtocol
			c.negotiated(got)
			if got != o.tls.NextProtos[0] {
				tc.Close()
				return nil, fmt.Errorf("ALPN negotiated %q, want %q", got, o.tls.NextProtos[0])
			}
			rec.alpn = got
			conn = tc
		}
		o.conns.add(rec)
		return &watchedConn{Conn: conn, rec: rec, h2: h2}, nil
	}
	switch o.proto {
	case "h2c", "h2-tls":
		t := &http2.Transport{
			AllowHTTP: o.tls == nil,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return dial(ctx, network, addr)
			},
		}
		return &http.Client{Transport: t, Timeout: o.timeout}, nil
	case "oneshot":
		t := &http.Transport{DialContext: dial, DisableKeepAlives: true, ForceAttemptHTTP2: false,
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		return &http.Client{Transport: t, Timeout: o.timeout}, nil
	case "http1", "http1-tls":
		t := &http.Transport{
			DialContext:         dial,
			ForceAttemptHTTP2:   false,
			TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
			MaxConnsPerHost:     o.http1Conns,
			MaxIdleConnsPerHost: o.http1Conns,
			MaxIdleConns:        o.http1Conns,
			IdleConnTimeout:     90 * time.Second,
		}
		if o.tls != nil {
			// The connection comes back past its handshake, ALPN checked.
			t.DialTLSContext = dial
		}
		return &http.Client{Transport: t, Timeout: o.timeout}, nil
	}
	return nil, fmt.Errorf("unknown protocol %q (h2c, http1, h2-tls, http1-tls or oneshot)", o.proto)
}

// tlsConfig is the client side of -proto h2-tls or http1-tls: the server verified against the
// PEM file `caFile` under `serverName`, ALPN offering only `alpn`.
func tlsConfig(caFile, serverName, alpn string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, NextProtos: []string{alpn}}, nil
}

// retryAfter is client-go's checkWait: a 429 or 5xx answer with a Retry-After in whole seconds
// asks for a retry after that many seconds.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return 0, false
	}
	s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
	if err != nil || s < 0 {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "host:port of the balancer")
	proto := flag.String("proto", "h2c", "h2c, http1, h2-tls, http1-tls or oneshot")
	transports := flag.Int("transports", 4, "independent client transports")
	workers := flag.Int("workers", 8, "workers per transport")
	paths := flag.String("paths", "/,/sleep?duration=20ms", "comma-separated paths; worker i uses path i mod n")
	duration := flag.Duration("duration", 5*time.Minute, "upper bound of the run (SIGINT/SIGTERM end it earlier)")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout")
	maxRetries := flag.Int("max-retries", 10, "Retry-After retries per request (client-go's default is 10)")
	http1Conns := flag.Int("http1-conns", 4, "http1: connections per transport")
	caFile := flag.String("cacert", "", "h2-tls, http1-tls: PEM file of the CA that signed the server's certificate")
	serverName := flag.String("server-name", "", "h2-tls, http1-tls: name verified in the server's certificate (default: the host of -addr)")
	connLogPath := flag.String("conn-log", "", "write one JSON line per connection to this file at the end")
	rate := flag.Int("rate", 500, "oneshot: new connections (one request each) per second")
	maxInFlight := flag.Int("max-in-flight", 1024, "oneshot: requests in flight at most")
	flag.Parse()
	if *proto == "oneshot" && (*rate <= 0 || *maxInFlight <= 0) {
		fmt.Fprintln(os.Stderr, "error: -rate and -max-in-flight must be positive")
		os.Exit(2)
	}

	opts := clientOptions{proto: *proto, timeout: *timeout, http1Conns: *http1Conns, conns: &connLog{},
		dialErrs: &errorLog{keep: 5}}
	scheme := "http://"
	if *proto == "h2-tls" || *proto == "http1-tls" {
		if *caFile == "" {
			fmt.Fprintln(os.Stderr, "error: -proto", *proto, "needs -cacert")
			os.Exit(2)
		}
		name := *serverName
		if name == "" {
			host, _, err := net.SplitHostPort(*addr)
			if err != nil {
				fmt.Fprintln(os.Stderr, "error: -addr:", err)
				os.Exit(2)
			}
			name = host
		}
		alpn := "h2"
		if *proto == "http1-tls" {
			alpn = "http/1.1"
		}
		cfg, err := tlsConfig(*caFile, name, alpn)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error: -cacert:", err)
			os.Exit(2)
		}
		opts.tls = cfg
		scheme = "https://"
	}

	pathList := strings.Split(*paths, ",")
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-time.After(*duration):
		}
		close(stop)
	}()

	errs := &errorLog{keep: 5}
	kinds := &kindLog{kinds: map[string]int64{}, examples: map[string]string{}}
	nTransports := *transports
	if *proto == "oneshot" {
		nTransports = 0 // one transport, driven by oneshot below
	}
	all := make([]*counters, nTransports)
	var wg sync.WaitGroup
	start := time.Now()
	for t := 0; t < nTransports; t++ {
		c := &counters{retries: map[string]int64{}, alpn: map[string]int64{}}
		all[t] = c
		client, err := newClient(opts, c, t)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
		for w := 0; w < *workers; w++ {
			url := scheme + *addr + pathList[w%len(pathList)]
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if kind, msg := doClassified(client, url, c, *maxRetries); kind != "" {
						atomic.AddInt64(&c.failed, 1)
						kinds.add(kind, msg)
						errs.add(fmt.Sprintf("%.2fs transport %d: %s", time.Since(start).Seconds(), t, msg))
					} else {
						atomic.AddInt64(&c.ok, 1)
					}
				}
			}(t)
		}
	}
	var one result
	if *proto == "oneshot" {
		c := &counters{retries: map[string]int64{}, alpn: map[string]int64{}}
		all = append(all, c)
		client, _ := newClient(opts, c, 0)
		urls := make([]string, len(pathList))
		for i, p := range pathList {
			urls[i] = scheme + *addr + p
		}
		oneshot(client, urls, *rate, *maxInFlight, *maxRetries, c, errs, kinds, stop, &one)
	}
	wg.Wait()

	res := result{Protocol: *proto, TLS: opts.tls != nil, Transports: len(all), Workers: *workers,
		Errors: errs.errs, Retries: map[string]int64{}, ALPN: map[string]int64{}, Rate: one.Rate,
		Attempted: one.Attempted, AchievedRate: one.AchievedRate, MaxInFlight: one.MaxInFlight,
		FailureKinds: kinds.kinds, FailureExamples: kinds.examples}
	res.ElapsedS = time.Since(start).Seconds()
	if res.Errors == nil {
		res.Errors = []string{}
	}
	for _, c := range all {
		tr := transportResult{OK: c.ok, Failed: c.failed, Retries: c.retries, Dials: c.dials}
		res.PerTransport = append(res.PerTransport, tr)
		res.OK += tr.OK
		res.Failed += tr.Failed
		res.Dials += tr.Dials
		res.DialErrors += c.dialErrors
		for status, n := range tr.Retries {
			res.Retries[status] += n
		}
		for p, n := range c.alpn {
			res.ALPN[p] += n
		}
	}
	res.DialErrTexts = opts.dialErrs.errs
	if res.DialErrTexts == nil {
		res.DialErrTexts = []string{}
	}
	opts.conns.mu.Lock()
	conns := opts.conns.conns
	opts.conns.mu.Unlock()
	for _, r := range conns {
		r.mu.Lock()
		if r.goaways > 0 {
			res.GoawayConns++
		}
		if r.endMs == 0 {
			res.OpenAtEnd++
		} else if r.endedBy == "peer" {
			res.PeerClosed++
			if r.goaways == 0 {
				res.PeerNoGoaway++
			}
		}
		r.mu.Unlock()
	}
	if *connLogPath != "" {
		if err := writeConnLog(*connLogPath, conns); err != nil {
			fmt.Fprintln(os.Stderr, "error: -conn-log:", err)
			os.Exit(1)
		}
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

// writeConnLog writes one JSON line per connection: local port, dial, first GOAWAY and end as
// Unix milliseconds (0: none), GOAWAY frames received, who ended it, its transport.
func writeConnLog(path string, conns []*connRecord) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range conns {
		r.mu.Lock()
		line := map[string]interface{}{
			"port": r.port, "dial_ms": r.dialMs, "goaway_ms": r.goawayMs, "goaways": r.goaways,
			"end_ms": r.endMs, "ended_by": r.endedBy, "alpn": r.alpn, "transport": r.transport,
		}
		r.mu.Unlock()
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
