//! Routes, parses and renders health requests built from arbitrary bytes, checking that every
//! response has a legal status and a body of the shape kube-apiserver's `healthz.go` writes.
#![no_main]

use arbitrary::Arbitrary;
use lameduck::health::{
    parse_query, render_check, render_root, route, CheckOutcome, Endpoint, HealthTarget,
};
use libfuzzer_sys::fuzz_target;

/// The request path: mostly well-formed health paths, sometimes anything.
#[derive(Arbitrary, Debug)]
enum Path<'a> {
    Root {
        endpoint: u8,
        trailing_slash: bool,
    },
    Check {
        endpoint: u8,
        name: &'a str,
    },
    /// A registered check's path, by index.
    Registered {
        endpoint: u8,
        index: u8,
    },
    Raw(&'a str),
}

/// One `&`-separated part of the query.
#[derive(Arbitrary, Debug)]
enum Part<'a> {
    Verbose(Option<&'a str>),
    Exclude(&'a str),
    /// `exclude=<a registered check's name>`, percent-encoded or not.
    ExcludeRegistered {
        index: u8,
        encode: bool,
    },
    Raw(&'a str),
}

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    path: Path<'a>,
    query: Option<Vec<Part<'a>>>,
    /// Name and, when failing, the reason.
    checks: Vec<(&'a str, Option<&'a str>)>,
}

fn endpoint(index: u8) -> Endpoint {
    Endpoint::ALL[usize::from(index) % Endpoint::ALL.len()]
}

fn percent_encode(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

fuzz_target!(|input: Input<'_>| {
    let checks: Vec<CheckOutcome<'_>> = input
        .checks
        .iter()
        .take(8)
        .map(|&(name, reason)| CheckOutcome {
            name,
            result: reason.map_or(Ok(()), Err),
        })
        .collect();
    let registered = |index: u8| checks.get(usize::from(index) % checks.len().max(1));

    let path = match input.path {
        Path::Root {
            endpoint: e,
            trailing_slash,
        } => {
            format!(
                "{}{}",
                endpoint(e).path(),
                if trailing_slash { "/" } else { "" }
            )
        }
        Path::Check { endpoint: e, name } => format!("{}/{name}", endpoint(e).path()),
        Path::Registered { endpoint: e, index } => {
            format!(
                "{}/{}",
                endpoint(e).path(),
                registered(index).map_or("", |c| c.name)
            )
        }
        Path::Raw(raw) => raw.to_owned(),
    };
    let raw_query = input.query.map(|parts| {
        let parts: Vec<String> = parts
            .iter()
            .map(|part| match *part {
                Part::Verbose(None) => "verbose".to_owned(),
                Part::Verbose(Some(value)) => format!("verbose={value}"),
                Part::Exclude(name) => format!("exclude={name}"),
                Part::ExcludeRegistered { index, encode } => {
                    let name = registered(index).map_or("", |c| c.name);
                    let name = if encode {
                        percent_encode(name)
                    } else {
                        name.to_owned()
                    };
                    format!("exclude={name}")
                }
                Part::Raw(raw) => raw.to_owned(),
            })
            .collect();
        parts.join("&")
    });

    let query = parse_query(raw_query.as_deref());
    let target = route(&path);
    match target {
        None => {}
        Some(HealthTarget::Root(e)) => {
            assert!(path == e.path() || path.strip_suffix('/') == Some(e.path()));
        }
        Some(HealthTarget::Check(e, name)) => {
            assert!(!name.is_empty());
            assert_eq!(path, format!("{}/{name}", e.path()));
        }
    }

    // Render every endpoint's root, whatever the path said.
    for e in Endpoint::ALL {
        let response = render_root(e, &checks, &query);
        let any_failed = checks.iter().any(|c| c.result.is_err());
        let failing_not_excluded = checks
            .iter()
            .any(|c| c.result.is_err() && !query.is_excluded(c.name));
        match response.status {
            200 => {
                assert!(
                    response.body == "ok"
                        || response.body.ends_with(&format!("{e} check passed\n"))
                );
                assert_eq!(response.body == "ok", !query.verbose());
                assert!(!failing_not_excluded);
            }
            500 => {
                assert!(response.body.ends_with(&format!("{e} check failed\n")));
                assert!(any_failed);
            }
            other => panic!("root status {other}"),
        }
        if !any_failed {
            assert_eq!(response.status, 200);
        }
    }

    // Render the one check the path names, or an unknown one.
    let name = match target {
        Some(HealthTarget::Check(_, name)) => name,
        _ => path.as_str(),
    };
    let found = checks.iter().find(|c| c.name == name);
    let response = render_check(found);
    match (found.map(|c| c.result), response.status) {
        (None, 404) => assert_eq!(response.body, "404 page not found\n"),
        (Some(Ok(())), 200) => assert_eq!(response.body, "ok"),
        (Some(Err(reason)), 500) => {
            assert_eq!(response.body, format!("internal server error: {reason}\n"));
        }
        (outcome, status) => panic!("check {outcome:?} rendered as {status}"),
    }
});
