//! Unit tests of [`crate::health`].

use super::*;

const PING: CheckOutcome<'static> = CheckOutcome::passed("ping");
const BAD: CheckOutcome<'static> = CheckOutcome::failed("bad", "this will fail");

fn root(checks: &[CheckOutcome<'_>], raw_query: &str) -> (u16, String) {
    let response = render_root(Endpoint::Healthz, checks, &parse_query(Some(raw_query)));
    (response.status, response.body)
}

/// Serves `path?query` the way an adapter would, `checks` standing for the registry.
fn serve(path_and_query: &str, checks: &[CheckOutcome<'_>]) -> (u16, String) {
    let (path, raw_query) = match path_and_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_and_query, None),
    };
    let response = match route(path) {
        Some(HealthTarget::Root(endpoint)) => {
            render_root(endpoint, checks, &parse_query(raw_query))
        }
        Some(HealthTarget::Check(_, name)) => render_check(checks.iter().find(|c| c.name == name)),
        None => panic!("not a health path: {path}"),
    };
    (response.status, response.body)
}

fn s(text: &str) -> String {
    String::from(text)
}

/// kube `healthz_test.go` `testMultipleChecks`, every row, for `/healthz`.
#[test]
fn kube_multiple_checks_table() {
    let rows: &[(&str, &str, u16, bool)] = &[
        ("?verbose", "[+]ping ok\nhealthz check passed\n", 200, false),
        ("?exclude=dontexist", "ok", 200, false),
        ("?exclude=bad", "ok", 200, true),
        (
            "?verbose=true&exclude=bad",
            "[+]ping ok\n[+]bad excluded: ok\nhealthz check passed\n",
            200,
            true,
        ),
        (
            "?verbose=true&exclude=dontexist",
            "[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \
             \"dontexist\"\nhealthz check passed\n",
            200,
            false,
        ),
        ("/ping", "ok", 200, false),
        ("", "ok", 200, false),
        (
            "?verbose",
            "[+]ping ok\n[-]bad failed: reason withheld\nhealthz check failed\n",
            500,
            true,
        ),
        ("/ping", "ok", 200, true),
        ("/bad", "internal server error: this will fail\n", 500, true),
        (
            "",
            "[+]ping ok\n[-]bad failed: reason withheld\nhealthz check failed\n",
            500,
            true,
        ),
    ];
    for &(suffix, body, status, add_bad) in rows {
        let checks: &[CheckOutcome<'_>] = if add_bad { &[PING, BAD] } else { &[PING] };
        let got = serve(&alloc::format!("/healthz{suffix}"), checks);
        assert_eq!(got, (status, s(body)), "/healthz{suffix} bad={add_bad}");
    }
}

#[test]
fn plain_healthz_is_ok() {
    assert_eq!(serve("/healthz", &[PING]), (200, s("ok")));
    assert_eq!(HEADERS[0], ("Content-Type", "text/plain; charset=utf-8"));
    assert_eq!(HEADERS[1], ("X-Content-Type-Options", "nosniff"));
}

#[test]
fn readyz_during_shutdown() {
    let checks = [
        PING,
        CheckOutcome::failed("shutdown", "process is shutting down"),
    ];
    assert_eq!(
        serve("/readyz", &checks),
        (
            500,
            s("[+]ping ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n")
        )
    );
    assert_eq!(
        serve("/readyz/shutdown", &checks),
        (500, s("internal server error: process is shutting down\n"))
    );
}

#[test]
fn root_never_shows_the_reason() {
    let (_, body) = root(&[CheckOutcome::failed("x", "secret")], "verbose");
    assert!(!body.contains("secret"));
}

#[test]
fn excluding_the_failing_check_passes() {
    let checks = [
        PING,
        CheckOutcome::failed("shutdown", "process is shutting down"),
    ];
    assert_eq!(serve("/readyz?exclude=shutdown", &checks), (200, s("ok")));
    assert_eq!(
        serve("/readyz?exclude=shutdown&verbose", &checks),
        (
            200,
            s("[+]ping ok\n[+]shutdown excluded: ok\nreadyz check passed\n")
        )
    );
}

#[test]
fn verbose_with_any_value() {
    let verbose = (200, s("[+]ping ok\nhealthz check passed\n"));
    for q in [
        "verbose",
        "verbose=",
        "verbose=false",
        "verbose=0",
        "x=1&verbose=no",
        "verb%6Fse",
    ] {
        assert_eq!(root(&[PING], q), verbose, "{q}");
    }
    for q in [
        "",
        "verbosity",
        "Verbose",
        "x=verbose",
        "verbose=%zz",
        "verbose;",
    ] {
        assert_eq!(root(&[PING], q), (200, s("ok")), "{q}");
    }
    assert!(!parse_query(None).verbose());
}

#[test]
fn repeated_excludes() {
    let checks = [PING, BAD, CheckOutcome::failed("worse", "boom")];
    assert_eq!(
        root(&checks, "exclude=bad&exclude=worse&verbose"),
        (
            200,
            s("[+]ping ok\n[+]bad excluded: ok\n[+]worse excluded: ok\nhealthz check passed\n")
        )
    );
    assert_eq!(
        root(&checks, "exclude=bad"),
        (
            500,
            s(
                "[+]ping ok\n[+]bad excluded: ok\n[-]worse failed: reason withheld\n\
               healthz check failed\n"
            )
        )
    );
    // The same name twice is one exclusion, and raises no warning.
    assert_eq!(
        root(&[PING], "exclude=ping&exclude=ping&verbose"),
        (200, s("[+]ping excluded: ok\nhealthz check passed\n"))
    );
}

#[test]
fn percent_encoded_exclude() {
    let checks = [
        PING,
        CheckOutcome::failed("poststarthook/foo", "not finished"),
    ];
    for q in [
        "exclude=poststarthook%2Ffoo",
        "exclude=poststarthook%2ffoo",
        "exclude=poststarthook/foo",
        "%65xclude=poststarthook%2Ffoo",
    ] {
        assert_eq!(
            root(&checks, &alloc::format!("{q}&verbose")),
            (
                200,
                s("[+]ping ok\n[+]poststarthook/foo excluded: ok\nhealthz check passed\n")
            ),
            "{q}"
        );
    }
    // `+` is a space, so it cannot name `a+b`; `%2B` can.
    let plus = [CheckOutcome::failed("a+b", "x")];
    assert_eq!(root(&plus, "exclude=a%2Bb").0, 200);
    assert_eq!(root(&plus, "exclude=a+b").0, 500);
    assert_eq!(
        parse_query(Some("exclude=a+b"))
            .excludes()
            .collect::<Vec<_>>(),
        [b"a b"]
    );
}

#[test]
fn malformed_pairs_are_dropped_like_go() {
    let q = parse_query(Some(
        "exclude=%zz&exclude=ok&exclude=a%2&exclude=%&exclude=x;y&&verbose",
    ));
    assert!(q.verbose());
    assert_eq!(q.excludes().collect::<Vec<_>>(), [b"ok"]);
    let q = parse_query(Some("exclude&exclude=&=exclude&exclude==x"));
    assert_eq!(
        q.excludes().collect::<Vec<_>>(),
        [&b""[..], &b""[..], &b"=x"[..]]
    );
    assert!(q.is_excluded("=x") && q.is_excluded("") && !q.is_excluded("x"));
}

#[test]
fn too_many_parameters_mean_none() {
    let mut raw = String::from("verbose&exclude=ping");
    for _ in 0..(MAX_QUERY_PARAMS - 2) {
        raw.push('&');
    }
    assert!(parse_query(Some(&raw)).verbose());
    raw.push('&');
    assert_eq!(parse_query(Some(&raw)), HealthQuery::new());
}

#[test]
fn warn_line_is_sorted_deduplicated_and_quoted() {
    let (status, body) = root(
        &[PING, BAD],
        "exclude=zeta&exclude=bad&exclude=alpha&exclude=zeta&exclude=Beta&verbose",
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        "[+]ping ok\n[+]bad excluded: ok\nwarn: some health checks cannot be excluded: no \
         matches for \"Beta\",\"alpha\",\"zeta\"\nhealthz check passed\n"
    );
    let (_, body) = root(&[PING], "exclude=a%22b%5Cc&exclude=%0A%09%01%7F&verbose");
    assert!(
        body.contains(r#"no matches for "\n\t\x01\x7f","a\"b\\c""#),
        "{body}"
    );
    // The warn line also appears on failure, before the verdict.
    assert_eq!(
        root(&[BAD], "exclude=nope"),
        (
            500,
            s(
                "[-]bad failed: reason withheld\nwarn: some health checks cannot be excluded: \
               no matches for \"nope\"\nhealthz check failed\n"
            )
        )
    );
}

#[test]
fn go_quoting() {
    let quote = |bytes: &[u8]| {
        let mut out = String::new();
        push_go_quoted(&mut out, bytes);
        out
    };
    assert_eq!(quote(b""), r#""""#);
    assert_eq!(quote(b"poststarthook/foo"), r#""poststarthook/foo""#);
    assert_eq!(quote(b"\x07\x08\x0c\x0b\r"), r#""\a\b\f\v\r""#);
    assert_eq!(quote("é日本\u{1F600}".as_bytes()), "\"é日本\u{1F600}\"");
    assert_eq!(
        quote("\u{a0}\u{85}\u{200b}\u{feff}".as_bytes()),
        r#""\u00a0\u0085\u200b\ufeff""#
    );
    assert_eq!(
        quote("\u{e0001}\u{10ffff}".as_bytes()),
        r#""\U000e0001\U0010ffff""#
    );
    assert_eq!(quote(b"a\xffb\xe2\x82"), r#""a\xffb\xe2\x82""#);
    assert_eq!(quote("\u{fffd}".as_bytes()), "\"\u{fffd}\"");
    assert_eq!(quote(b"\xed\xa0\x80"), r#""\xed\xa0\x80""#);
}

#[test]
fn duplicate_check_names_use_up_the_exclusion() {
    let checks = [CheckOutcome::passed("x"), CheckOutcome::failed("x", "r")];
    assert_eq!(
        root(&checks, "exclude=x"),
        (
            500,
            s("[+]x excluded: ok\n[-]x failed: reason withheld\nhealthz check failed\n")
        )
    );
}

#[test]
fn no_checks_pass() {
    assert_eq!(root(&[], ""), (200, s("ok")));
    assert_eq!(root(&[], "verbose"), (200, s("healthz check passed\n")));
}

#[test]
fn endpoint_names() {
    for (endpoint, name) in Endpoint::ALL
        .into_iter()
        .zip(["readyz", "livez", "healthz"])
    {
        assert_eq!(endpoint.name(), name);
        assert_eq!(endpoint.path(), alloc::format!("/{name}"));
        assert_eq!(alloc::format!("{endpoint}"), name);
        let (_, body) = serve(&alloc::format!("/{name}?verbose"), &[PING]);
        assert_eq!(body, alloc::format!("[+]ping ok\n{name} check passed\n"));
    }
}

#[test]
fn route_table() {
    use Endpoint::*;
    use HealthTarget::*;
    let rows: &[(&str, Option<HealthTarget<'_>>)] = &[
        ("/readyz", Some(Root(Readyz))),
        ("/readyz/", Some(Root(Readyz))),
        ("/livez", Some(Root(Livez))),
        ("/livez/", Some(Root(Livez))),
        ("/healthz", Some(Root(Healthz))),
        ("/healthz/", Some(Root(Healthz))),
        ("/readyz/ping", Some(Check(Readyz, "ping"))),
        ("/livez/ping", Some(Check(Livez, "ping"))),
        ("/healthz/log", Some(Check(Healthz, "log"))),
        (
            "/readyz/poststarthook/foo",
            Some(Check(Readyz, "poststarthook/foo")),
        ),
        ("/readyz//", Some(Check(Readyz, "/"))),
        ("/readyzx", None),
        ("/readyzx/ping", None),
        ("/ready", None),
        ("/ready/ping", None),
        ("readyz", None),
        ("//readyz", None),
        ("/READYZ", None),
        ("/", None),
        ("", None),
        ("/metrics", None),
        ("/readyz?verbose", None),
    ];
    for &(path, want) in rows {
        assert_eq!(route(path), want, "{path:?}");
    }
    assert_eq!(route("/livez/x").map(HealthTarget::endpoint), Some(Livez));
}

#[test]
fn unknown_check_is_404() {
    assert_eq!(
        serve("/readyz/nope", &[PING]),
        (404, s("404 page not found\n"))
    );
    assert_eq!(render_check(None).status, 404);
    assert_eq!(render_check(Some(&PING)), HealthResponse::new(200, "ok"));
}

#[test]
fn check_name_validation() {
    for name in [
        "ping",
        "log",
        "shutdown",
        "poststarthook/foo",
        "etcd-readiness",
        "a.b_c:d",
    ] {
        assert!(is_valid_check_name(name), "{name}");
    }
    for name in [
        "", " ", "a b", "a\tb", "a\nb", "a\u{0}", "a\u{85}", "a\u{a0}b", "a?b", "a&b", "a#b",
        "a%2Fb", "/a", "a/", "a//b", "./a", "a/..", ".",
    ] {
        assert!(!is_valid_check_name(name), "{name:?}");
    }
}

#[test]
fn query_builders_match_parsing() {
    assert_eq!(
        HealthQuery::new()
            .with_verbose(true)
            .with_exclude("a")
            .with_exclude("b/c"),
        parse_query(Some("verbose&exclude=a&exclude=b%2Fc"))
    );
}
