"""The client proof (`python3 tests/proofs client`): lameduck-client's RetryLayer under tonic's
and hyper-util's clients through rolling updates, restarts on one host, Go's net/http and
aiohttp (proof.py; the runs in scenarios.py), with its own servers: goserver/ (Go, built in
GOPATH mode) and aioserver.py (aiohttp)."""
