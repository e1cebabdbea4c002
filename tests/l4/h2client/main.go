// Command h2client is the load of the L4 rolling-update proof (tests/rolling/rolling_restart_l4.py):
// a few independent client transports, as several kubelets or controllers would hold, each
// multiplexing the requests of several workers over few long-lived connections.
//
// Protocols:
//
//	h2c    golang.org/x/net/http2's Transport (the one client-go uses) with prior knowledge over
//	       plain TCP; one transport keeps one connection while the server lets it.
//	http1  net/http's Transport with keep-alive, HTTP/2 off, at most -http1-conns connections.
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
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

type counters struct {
	ok, failed, dials int64
	mu                sync.Mutex
	retries           map[string]int64
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
	Transports   int               `json:"transports"`
	Workers      int               `json:"workers_per_transport"`
	ElapsedS     float64           `json:"elapsed_s"`
	OK           int64             `json:"ok"`
	Failed       int64             `json:"failed"`
	Retries      map[string]int64  `json:"retries"`
	Dials        int64             `json:"dials"`
	Errors       []string          `json:"errors"`
	PerTransport []transportResult `json:"per_transport"`
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

func newClient(proto string, c *counters, timeout time.Duration, http1Conns int) (*http.Client, error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		atomic.AddInt64(&c.dials, 1)
		return dialer.DialContext(ctx, network, addr)
	}
	switch proto {
	case "h2c":
		t := &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return dial(ctx, network, addr)
			},
		}
		return &http.Client{Transport: t, Timeout: timeout}, nil
	case "http1":
		t := &http.Transport{
			DialContext:         dial,
			ForceAttemptHTTP2:   false,
			TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
			MaxConnsPerHost:     http1Conns,
			MaxIdleConnsPerHost: http1Conns,
			MaxIdleConns:        http1Conns,
			IdleConnTimeout:     90 * time.Second,
		}
		return &http.Client{Transport: t, Timeout: timeout}, nil
	}
	return nil, fmt.Errorf("unknown protocol %q (h2c or http1)", proto)
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

// do runs one logical request with its Retry-After retries; it returns an error text on failure.
func do(client *http.Client, url string, c *counters, maxRetries int) string {
	for attempt := 0; ; attempt++ {
		resp, err := client.Get(url)
		if err != nil {
			return err.Error()
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return "reading body: " + err.Error()
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return ""
		}
		wait, retry := retryAfter(resp)
		if !retry || attempt >= maxRetries {
			return fmt.Sprintf("status %d after %d retries", resp.StatusCode, attempt)
		}
		c.retried(resp.StatusCode)
		time.Sleep(wait)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "host:port of the balancer")
	proto := flag.String("proto", "h2c", "h2c or http1")
	transports := flag.Int("transports", 4, "independent client transports")
	workers := flag.Int("workers", 8, "workers per transport")
	paths := flag.String("paths", "/,/sleep?duration=20ms", "comma-separated paths; worker i uses path i mod n")
	duration := flag.Duration("duration", 5*time.Minute, "upper bound of the run (SIGINT/SIGTERM end it earlier)")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout")
	maxRetries := flag.Int("max-retries", 10, "Retry-After retries per request (client-go's default is 10)")
	http1Conns := flag.Int("http1-conns", 4, "http1: connections per transport")
	flag.Parse()

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
	all := make([]*counters, *transports)
	var wg sync.WaitGroup
	start := time.Now()
	for t := 0; t < *transports; t++ {
		c := &counters{retries: map[string]int64{}}
		all[t] = c
		client, err := newClient(*proto, c, *timeout, *http1Conns)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
		for w := 0; w < *workers; w++ {
			url := "http://" + *addr + pathList[w%len(pathList)]
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if msg := do(client, url, c, *maxRetries); msg != "" {
						atomic.AddInt64(&c.failed, 1)
						errs.add(fmt.Sprintf("%.2fs transport %d: %s", time.Since(start).Seconds(), t, msg))
					} else {
						atomic.AddInt64(&c.ok, 1)
					}
				}
			}(t)
		}
	}
	wg.Wait()

	res := result{Protocol: *proto, Transports: *transports, Workers: *workers, Errors: errs.errs,
		Retries: map[string]int64{}}
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
		for status, n := range tr.Retries {
			res.Retries[status] += n
		}
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}
