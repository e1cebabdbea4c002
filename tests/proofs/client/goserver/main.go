// Command goserver is the Go reference of the client proof (python3 tests/proofs client): Go's
// net/http server, not lameduck, restarted with Server.Shutdown the way a plain Go service is:
// on SIGTERM it stops listening at once (no lame-duck window unless -shutdown-delay), closes
// its idle connections, sends GOAWAY on its HTTP/2 connections and waits for the requests in
// flight, then exits 0.
//
// Routes:
//
//	GET /readyz   200 "ok" (HAProxy's health check)
//	GET /...      200 "ok"
//	POST /...     reads the body whole, then 200 "ok"
//
// Each request answered 200 that carries an x-request-id header has that id appended, one
// line each, to the file of -record: the requests it processed. Plain TCP serves HTTP/1.1 and
// h2c with prior knowledge (golang.org/x/net/http2/h2c, configured with http2.ConfigureServer
// so that Server.Shutdown also starts the GOAWAY of HTTP/2 connections).
//
// The first line on stdout, once listening: "listening on http://IP:PORT".
//
// Built by the proof in GOPATH mode, offline, with Debian's golang-golang-x-net-dev:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o goserver .
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// recorder appends the ids of the requests processed to a file, one line each.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func (r *recorder) processed(id string) {
	if r.f == nil || id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.WriteString(id + "\n"); err != nil {
		log.Printf("record: %v", err)
	}
}

func routes(rec *recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		rec.processed(r.Header.Get("x-request-id"))
		fmt.Fprint(w, "ok")
	})
}

// h2cConns counts the h2c connections, which Server.Shutdown does not wait for.
var h2cConns sync.WaitGroup

func countH2c(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PRI" && r.URL.Path == "*" && r.ProtoMajor == 2 {
			h2cConns.Add(1)
			defer h2cConns.Done()
		}
		h.ServeHTTP(w, r)
	})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	delay := flag.Duration("shutdown-delay", 0, "from the signal to Server.Shutdown")
	bound := flag.Duration("request-timeout", 30*time.Second, "the bound on Server.Shutdown")
	record := flag.String("record", "", "append the id of each request processed to this file")
	flag.Parse()

	rec := &recorder{}
	if *record != "" {
		f, err := os.OpenFile(*record, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatalf("record: %v", err)
		}
		rec.f = f
	}
	h2s := &http2.Server{MaxConcurrentStreams: 250, IdleTimeout: 90 * time.Second}
	srv := &http.Server{
		Handler:           countH2c(h2c.NewHandler(routes(rec), h2s)),
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds),
	}
	if err := http2.ConfigureServer(srv, h2s); err != nil {
		log.Fatalf("http2: %v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if err := srv.Serve(ln); err != http.ErrServerClosed {
			log.Fatalf("serve: %v", err)
		}
	}()

	sig := <-signals
	start := time.Now()
	log.Printf("received signal %v; Shutdown in %v", sig, *delay)
	time.Sleep(*delay)
	ctx, cancel := context.WithTimeout(context.Background(), *bound)
	defer cancel()
	err = srv.Shutdown(ctx)
	log.Printf("Shutdown returned %v after %v", err, time.Since(start))
	waited := make(chan struct{})
	go func() {
		h2cConns.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		log.Printf("h2c connections still open after %v", time.Since(start))
	}
	os.Exit(0)
}
