// Command goserver is the reference of the dead_peers proof (python3 tests/proofs dead_peers):
// Go's net/http server, kube-apiserver's, serving the routes the proof uses and terminated
// the way kube-apiserver terminates in its default mode.
//
// Routes, as the example servers answer them (docs/design.md#example-servers):
//
//	GET /                   200 "ok"
//	GET /sleep?duration=D   sleeps D, then 200 "Welcome HTTP Server"; a bad D gets 400
//	GET /bytes?size=N       200 application/octet-stream, Content-Length N, N zero bytes
//	                        written 64 KiB at a time from one buffer; a bad N gets 400
//
// Plain TCP serves HTTP/1.1 and h2c with prior knowledge (h2c.NewHandler); with -tls-cert-file
// and -tls-private-key-file it serves TLS, ALPN h2 and http/1.1. Both through
// golang.org/x/net/http2 configured as kube-apiserver configures it (http2.ConfigureServer,
// 250 streams, 90 s idle timeout; 32 s to read a request head), so Server.Shutdown also
// starts the graceful shutdown (GOAWAY) of the HTTP/2 connections.
//
// The first line on stdout, once listening: "listening on http://IP:PORT" (https with TLS).
// On SIGTERM or SIGINT it sleeps -shutdown-delay (kube-apiserver's lame-duck window), then
// calls Server.Shutdown with a context bounded by -request-timeout (kube-apiserver's HTTP
// shutdown timeout in its default mode), waits (within the same bound) for the h2c
// connections Shutdown does not count (see h2cConns), then exits 0 whatever Shutdown
// returned: the connections still open end with the process, as they do in kube-apiserver.
//
// Built by the proof in GOPATH mode, offline, with Debian's golang-golang-x-net-dev:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o goserver .
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// maxSize is the largest body /bytes sends: 1 GiB.
const maxSize = 1 << 30

// chunk is what /bytes writes at a time.
var chunk = make([]byte, 64*1024)

func routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("duration"))
		if err != nil {
			http.Error(w, "invalid duration parameter: "+err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(d):
			fmt.Fprint(w, "Welcome HTTP Server")
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		raw := r.URL.Query().Get("size")
		size, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || size > maxSize {
			http.Error(w, fmt.Sprintf("invalid size parameter %q", raw), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatUint(size, 10))
		for left := size; left > 0; {
			n := uint64(len(chunk))
			if left < n {
				n = left
			}
			if _, err := w.Write(chunk[:n]); err != nil {
				return
			}
			left -= n
		}
	})
	return mux
}

// h2cConns counts the h2c connections being served. h2c.NewHandler hijacks each one out of
// the http.Server, whose Shutdown then neither counts nor waits for it; kube-apiserver serves
// HTTP/2 over TLS only, where Shutdown waits for every HTTP/2 connection until it closes
// (after its GOAWAY, once its streams have ended). The reference waits the same way for its
// h2c connections, within the same bound, so that its h2c streams in flight complete.
var h2cConns sync.WaitGroup

// countH2c counts, in h2cConns, each h2c connection `h` serves: its prior-knowledge preface
// is one request whose handler returns when the connection ends.
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
	delay := flag.Duration("shutdown-delay", 0, "the lame-duck window: from the signal to Server.Shutdown")
	requestTimeout := flag.Duration("request-timeout", time.Minute, "the bound on Server.Shutdown")
	certFile := flag.String("tls-cert-file", "", "serve TLS with this PEM certificate chain")
	keyFile := flag.String("tls-private-key-file", "", "the PEM private key of -tls-cert-file")
	flag.Parse()

	h2s := &http2.Server{MaxConcurrentStreams: 250, IdleTimeout: 90 * time.Second}
	srv := &http.Server{
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
		ErrorLog:          log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds),
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
		srv.Handler = routes()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		srv.Handler = countH2c(h2c.NewHandler(routes(), h2s))
	}
	// Registers Shutdown's GOAWAY for every HTTP/2 connection (h2c ones included) and, with
	// TLS, ALPN h2.
	if err := http2.ConfigureServer(srv, h2s); err != nil {
		log.Fatalf("http2: %v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	fmt.Printf("listening on %s://%s\n", scheme, ln.Addr())

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		var err error
		if *certFile != "" {
			err = srv.ServeTLS(ln, *certFile, *keyFile)
		} else {
			err = srv.Serve(ln)
		}
		if err != http.ErrServerClosed {
			log.Fatalf("serve: %v", err)
		}
	}()

	sig := <-signals
	start := time.Now()
	log.Printf("received signal %v; shutting down in %v", sig, *delay)
	time.Sleep(*delay)
	ctx, cancel := context.WithTimeout(context.Background(), *requestTimeout)
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
		log.Printf("h2c connections closed after %v; exiting 0", time.Since(start))
	case <-ctx.Done():
		log.Printf("h2c connections still open after %v; exiting 0", time.Since(start))
	}
	os.Exit(0)
}
