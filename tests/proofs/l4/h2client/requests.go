// Requests and their failures: one logical request with its Retry-After retries, the kinds of
// failure (failure_kinds in the JSON line), and the oneshot protocol's fixed-rate new
// connections.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// doClassified runs one logical request with its Retry-After retries; on failure it returns the
// failure's kind (classify, or "status NNN") and its text.
func doClassified(client *http.Client, url string, c *counters, maxRetries int) (string, string) {
	for attempt := 0; ; attempt++ {
		resp, err := client.Get(url)
		if err != nil {
			return classify(err), err.Error()
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return classify(err), "reading body: " + err.Error()
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return "", ""
		}
		wait, retry := retryAfter(resp)
		if !retry || attempt >= maxRetries {
			return fmt.Sprintf("status %d", resp.StatusCode), fmt.Sprintf("status %d after %d retries", resp.StatusCode, attempt)
		}
		c.retried(resp.StatusCode)
		time.Sleep(wait)
	}
}

// classify names the kind of a failed request's error (failure_kinds).
func classify(err error) string {
	var ne net.Error
	text := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(text, "connection refused"):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(text, "connection reset") || strings.Contains(text, "broken pipe"):
		return "reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "addrnotavail"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.HasSuffix(text, "EOF"):
		return "eof"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	}
	return "other"
}

// kindLog counts the failures by kind, with the first example of each.
type kindLog struct {
	mu       sync.Mutex
	kinds    map[string]int64
	examples map[string]string
}

func (l *kindLog) add(kind, example string) {
	l.mu.Lock()
	l.kinds[kind]++
	if _, ok := l.examples[kind]; !ok {
		l.examples[kind] = example
	}
	l.mu.Unlock()
}

// oneshot starts one request on a new connection every 1/rate s (on a fixed schedule: a late
// start is caught up at once) until stop, at most maxInFlight at once, and waits for them.
// It fills res's oneshot fields; the ok and failed counts go to c.
func oneshot(client *http.Client, urls []string, rate, maxInFlight, maxRetries int, c *counters,
	errs *errorLog, kinds *kindLog, stop <-chan struct{}, res *result) {
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	var inFlight int64
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	next := start
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var n int64
loop:
	for ; ; n++ {
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-stop:
				break loop
			case <-timer.C:
			}
		}
		select {
		case <-stop:
			break loop
		case sem <- struct{}{}:
		}
		if now := atomic.AddInt64(&inFlight, 1); now > res.MaxInFlight {
			res.MaxInFlight = now
		}
		wg.Add(1)
		go func(url string) {
			defer func() { atomic.AddInt64(&inFlight, -1); <-sem; wg.Done() }()
			if kind, msg := doClassified(client, url, c, maxRetries); kind != "" {
				atomic.AddInt64(&c.failed, 1)
				kinds.add(kind, msg)
				errs.add(fmt.Sprintf("%.2fs oneshot: %s", time.Since(start).Seconds(), msg))
			} else {
				atomic.AddInt64(&c.ok, 1)
			}
		}(urls[n%int64(len(urls))])
		next = next.Add(interval)
	}
	res.Rate, res.Attempted = rate, n
	res.AchievedRate = float64(n) / time.Since(start).Seconds()
	wg.Wait()
}
