// Command wsclient opens WebSockets of golang.org/x/net/websocket (Debian's
// golang-golang-x-net-dev, built in GOPATH mode) on an example server's /ws, for the
// websockets_go proof: each client sends a text message every -interval and checks its echo,
// until the server's Close comes; it then answers with its own Close (status 1000) as the
// library's Conn.Close does, and records what came.
//
// Output on stdout: the line "ready N" once every client has tried to open (N opened), then,
// when every client has ended (or -timeout is over), one JSON array with a record per
// client: its echoes, the server's Close status and reason (0 and "" without one), when the
// Close came (Unix nanoseconds), and what went wrong, if anything.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/net/websocket"
)

// record is what one client saw.
type record struct {
	Index   int    `json:"index"`
	Echoes  int    `json:"echoes"`
	Status  int    `json:"status"`
	Reason  string `json:"reason"`
	CloseNs int64  `json:"close_ns"`
	Error   string `json:"error"`
}

func main() {
	url := flag.String("url", "", "the server's WebSocket URL, e.g. ws://127.0.0.1:8080/ws")
	n := flag.Int("n", 200, "clients")
	interval := flag.Duration("interval", 100*time.Millisecond, "between a client's messages")
	timeout := flag.Duration("timeout", 60*time.Second, "how long the whole run may take")
	flag.Parse()
	if *url == "" || *n < 1 || *interval <= 0 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "usage: wsclient -url ws://HOST:PORT/ws [-n N] [-interval D] [-timeout D]")
		os.Exit(2)
	}
	deadline := time.Now().Add(*timeout)
	records := make([]record, *n)
	conns := make([]*websocket.Conn, *n)
	// Opening handshakes in flight at once: the listener's backlog is not flooded.
	slots := make(chan struct{}, 64)
	var opening sync.WaitGroup
	for i := range conns {
		records[i].Index = i
		opening.Add(1)
		go func(i int) {
			defer opening.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			ws, err := websocket.Dial(*url, "", "http://127.0.0.1/")
			if err != nil {
				records[i].Error = "dial: " + err.Error()
				return
			}
			conns[i] = ws
		}(i)
	}
	opening.Wait()
	opened := 0
	for _, ws := range conns {
		if ws != nil {
			opened++
		}
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", opened)
	out.Flush()
	var running sync.WaitGroup
	for i, ws := range conns {
		if ws == nil {
			continue
		}
		running.Add(1)
		go func(i int, ws *websocket.Conn) {
			defer running.Done()
			serve(ws, &records[i], *interval, deadline)
		}(i, ws)
	}
	running.Wait()
	json.NewEncoder(out).Encode(records)
	out.Flush()
}

// serve sends a message every interval and reads what comes until the server's Close (then
// answers it) or an error.
func serve(ws *websocket.Conn, r *record, interval time.Duration, deadline time.Time) {
	defer ws.Close() // the Close answered (status 1000), and the connection closed
	ws.SetDeadline(deadline)
	stop := make(chan struct{})
	sent := make(chan string, 1024)
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for seq := 0; ; seq++ {
			msg := fmt.Sprintf("client %d message %d", r.Index, seq)
			select {
			case sent <- msg:
			default:
				return // far behind: the reader records the missing echoes
			}
			if err := websocket.Message.Send(ws, msg); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
		}
	}()
	defer writer.Wait()
	defer close(stop)
	for {
		frame, err := ws.NewFrameReader()
		if err != nil {
			// The connection ended without a Close (1006, abnormal closure), or the run's
			// deadline passed.
			r.Error = "read: " + err.Error()
			return
		}
		payload, err := io.ReadAll(frame)
		if err != nil {
			r.Error = "read payload: " + err.Error()
			return
		}
		switch frame.PayloadType() {
		case websocket.TextFrame:
			want := <-sent
			if string(payload) != want {
				r.Error = fmt.Sprintf("echo %q, want %q", payload, want)
				return
			}
			r.Echoes++
		case websocket.CloseFrame:
			r.CloseNs = time.Now().UnixNano()
			if len(payload) >= 2 {
				r.Status = int(binary.BigEndian.Uint16(payload))
				r.Reason = string(payload[2:])
			}
			return
		}
	}
}
