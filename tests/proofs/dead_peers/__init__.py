"""The dead_peers proof (`python3 tests/proofs dead_peers`): silent peers cannot hold a
termination, on every example server and against Go's net/http server.

  proof     the command line, the rows and the runs, the end
  runs      one run: a server, a row, its peers, SIGTERM, the checks
  peers     the clients: silent connections, unread responses, requests in flight, and the
            watch of when the server ended each connection
  h2peer    HTTP/2 by hand (Python's h2 package) and the few gRPC frames sent
  report    each run's figures, the comparison with Go, the table
  goserver/ the Go reference (net/http, golang.org/x/net/http2), built in GOPATH mode
"""
