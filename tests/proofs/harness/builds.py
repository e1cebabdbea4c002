"""Where things are (the repository, the proofs, the Go clients, the grpcio load script) and how
they are built: the example servers (cargo, release) and the Go clients (GOPATH mode)."""

import json
import os
import subprocess

from harness.processes import log

# tests/proofs, and the repository two levels above it.
PROOFS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(PROOFS))
# The Go client of the layer-4 proof and of the storm, and grpcio's load (run as a script).
H2CLIENT_DIR = os.path.join(PROOFS, "l4", "h2client")
# The Go WebSocket client of the websockets_go proof.
WSCLIENT_DIR = os.path.join(PROOFS, "rolling", "wsclient")
GRPCIO_LOAD = os.path.join(PROOFS, "rolling", "grpcio_load.py")

# The example servers every proof runs on (cargo build --release --examples).
RUNTIMES = ["tokio_server", "axum_server", "smol_server", "actix_server"]


def target_dir():
    if os.environ.get("CARGO_TARGET_DIR"):
        return os.path.abspath(os.environ["CARGO_TARGET_DIR"])
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    return json.loads(out)["target_directory"]


def cargo_build(*targets):
    """`cargo build --release TARGETS` in the repository (e.g. "--examples"); True when it
    succeeded."""
    log("==> cargo build --release " + " ".join(targets))
    return subprocess.run(["cargo", "build", "--release", *targets], cwd=ROOT).returncode == 0


def examples_dir():
    """The release build's examples directory."""
    return os.path.join(target_dir(), "release", "examples")


def build_h2client(build_dir):
    """Builds the Go client (tests/proofs/l4/h2client) into `build_dir`: see `build_go`."""
    return build_go(H2CLIENT_DIR, build_dir)


def build_wsclient(build_dir):
    """Builds the Go WebSocket client (tests/proofs/rolling/wsclient, golang.org/x/net/websocket)
    into `build_dir`: see `build_go`."""
    return build_go(WSCLIENT_DIR, build_dir)


def build_go(src_dir, build_dir):
    """Builds the Go program in `src_dir` into `build_dir` in GOPATH mode, with Debian's
    golang-golang-x-net-dev; returns the binary's path, or None after a failed build."""
    name = os.path.basename(src_dir)
    out = os.path.join(build_dir, name)
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOCACHE=os.environ.get("GOCACHE") or os.path.join(build_dir, "cache"))
    log(f"==> go build {os.path.relpath(src_dir, ROOT)} (GOPATH mode, Debian's golang-golang-x-net-dev)")
    done = subprocess.run(["go", "build", "-o", out, "."], cwd=src_dir, env=env, timeout=600)
    return out if done.returncode == 0 else None
