"""TLS for the proofs: a throwaway CA and a server certificate made with the openssl CLI, and
the run's TLS (`use_tls`), which the loads' Python clients speak when it is set."""

import os
import socket
import ssl
import subprocess
import tempfile


class Tls:
    """A throwaway CA and a server certificate it signed, made with the openssl CLI (ECDSA
    P-256, valid two days): SANs IP 127.0.0.1 and DNS localhost, serverAuth. The files are in
    `workdir`/tls, or in a new temporary directory when `workdir` is None (the caller removes
    `dir`).

    `flags` are the example servers' TLS flags; `context` is a client context that trusts only
    this CA and checks the name."""

    def __init__(self, workdir=None):
        if workdir is None:
            self.dir = tempfile.mkdtemp(prefix="proofs-tls-")
        else:
            self.dir = os.path.join(workdir, "tls")
            os.makedirs(self.dir, exist_ok=True)
        d = self.dir
        self.ca = os.path.join(d, "ca.crt")
        self.cert = os.path.join(d, "server.crt")
        self.key = os.path.join(d, "server.key")
        ca_key = os.path.join(d, "ca.key")
        csr = os.path.join(d, "server.csr")
        ext = os.path.join(d, "server.ext")
        with open(ext, "w") as f:
            f.write(
                "basicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature\n"
                "extendedKeyUsage = serverAuth\n"
                "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
            )
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for cmd in (
            ["req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "2",
             "-subj", "/CN=lameduck proofs CA",
             "-addext", "basicConstraints = critical, CA:TRUE",
             "-addext", "keyUsage = critical, keyCertSign, cRLSign"],
            ["req", "-new", *ec, "-keyout", self.key, "-out", csr, "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", self.cert, "-days", "2", "-sha256", "-extfile", ext],
        ):
            done = subprocess.run(["openssl", *cmd], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise RuntimeError(f"openssl {cmd[0]} failed:\n{done.stderr}")
        self.flags = ["--tls-cert-file", self.cert, "--tls-private-key-file", self.key]
        self.context = ssl.create_default_context(cafile=self.ca)

    def wrap(self, sock):
        return self.context.wrap_socket(sock, server_hostname="127.0.0.1")


# The run's TLS (`use_tls`); None: plaintext.
_run_tls = None


def use_tls(tls):
    """Makes `tls` (a Tls, or None for plaintext) the run's TLS: the one `run_tls` returns,
    which `connect`, `http_get`, `wrk`, `WatchStream` and `KeepAliveProbe` speak."""
    global _run_tls
    _run_tls = tls


def run_tls():
    """The run's TLS (a Tls), or None when the run is plaintext."""
    return _run_tls


def connect(port, timeout):
    """A connection to 127.0.0.1:`port`, over TLS when the run uses it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if _run_tls is None:
        return sock
    try:
        return _run_tls.wrap(sock)
    except BaseException:
        sock.close()
        raise
