//! Health bodies and headers before and during termination (`docs/design.md#health`).

use std::time::Duration;

use crate::support::*;

pub fn health_bodies(bin: &'static str) {
    // `--livez-grace-period` only matters for post-start hooks, which the examples lack.
    let mut server = ServerProcess::start(
        bin,
        &["--shutdown-delay", "3s", "--livez-grace-period", "5s"],
    );
    let addr = server.addr;
    let before = "before the signal";

    // No routes-ready reports: MuxAndDiscoveryComplete fires at once.
    server.wait_signal(MUX_AND_DISCOVERY_COMPLETE, Duration::from_secs(5));
    assert_reply(&get(addr, "/"), 200, "ok", "GET /");
    assert_health(addr, "/readyz", 200, "ok", before);
    // HasBeenReady fires on the first 200 from the root /readyz (`docs/design.md#logs`: one log
    // line per signal as it fires).
    server.wait_signal(HAS_BEEN_READY, Duration::from_secs(5));
    assert_health(addr, "/readyz?verbose", 200, READYZ_VERBOSE_OK, before);
    // `verbose` with any value means verbose, as kube-apiserver.
    assert_health(
        addr,
        "/readyz?verbose=false",
        200,
        READYZ_VERBOSE_OK,
        before,
    );
    assert_health(addr, "/readyz/ping", 200, "ok", before);
    assert_health(addr, "/readyz/shutdown", 200, "ok", before);
    assert_health(addr, "/readyz?exclude=shutdown", 200, "ok", before);
    assert_health(
        addr,
        "/readyz?exclude=shutdown&verbose",
        200,
        READYZ_EXCLUDED_SHUTDOWN,
        before,
    );
    assert_health(
        addr,
        "/readyz?verbose&exclude=nope&exclude=alsonope",
        200,
        "[+]ping ok\n[+]shutdown ok\nwarn: some health checks cannot be excluded: \
         no matches for \"alsonope\",\"nope\"\nreadyz check passed\n",
        before,
    );
    assert_health(addr, "/livez", 200, "ok", before);
    assert_health(addr, "/livez?verbose", 200, LIVEZ_VERBOSE_OK, before);
    assert_health(addr, "/livez/ping", 200, "ok", before);
    assert_health(addr, "/healthz", 200, "ok", before);
    assert_health(addr, "/healthz?verbose", 200, HEALTHZ_VERBOSE_OK, before);
    assert_health(addr, "/healthz/ping", 200, "ok", before);
    // `shutdown` is a readyz check only.
    let resp = get(addr, "/livez/shutdown");
    assert_ne!(
        resp.status(),
        200,
        "/livez/shutdown has no such check\n{resp}"
    );

    let sent = server.signal("TERM");
    assert_readyz_turns_red(&server, sent);
    let during = "during termination";
    assert_health(addr, "/readyz", 500, READYZ_SHUTTING_DOWN, during);
    assert_health(addr, "/readyz?verbose", 500, READYZ_SHUTTING_DOWN, during);
    assert_health(
        addr,
        "/readyz/shutdown",
        500,
        READYZ_SHUTDOWN_CHECK_FAILED,
        during,
    );
    assert_health(addr, "/readyz/ping", 200, "ok", during);
    assert_health(addr, "/readyz?exclude=shutdown", 200, "ok", during);
    assert_health(
        addr,
        "/readyz?exclude=shutdown&verbose",
        200,
        READYZ_EXCLUDED_SHUTDOWN,
        during,
    );
    assert_health(addr, "/livez", 200, "ok", during);
    assert_health(addr, "/livez?verbose", 200, LIVEZ_VERBOSE_OK, during);
    assert_health(addr, "/healthz", 200, "ok", during);
    assert_health(addr, "/healthz?verbose", 200, HEALTHZ_VERBOSE_OK, during);
    assert_reply(&get(addr, "/"), 200, "ok", "GET / during the delay");
    assert!(
        !server.signals().has(NOT_ACCEPTING),
        "the checks above were meant to run inside the 3 s delay\n{}",
        server.describe()
    );

    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&["--shutdown-delay", "3s", "--livez-grace-period", "5s"]);
}
