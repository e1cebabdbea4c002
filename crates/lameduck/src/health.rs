//! Health endpoint responses, byte for byte as kube-apiserver's `healthz.go` (specified in the
//! repository's `docs/design.md#health`).
//!
//! This module is pure: the caller runs its checks (it owns the registry, the clock and the
//! livez grace period) and hands the outcomes here, in registration order; this module routes
//! the request path, parses the query and renders the status and body. It holds no state.
//!
//! A request is served in four steps:
//! 1. [`route`] the path component to a [`HealthTarget`] (`None`: not a health path).
//! 2. For [`HealthTarget::Root`], [`parse_query`] the raw query, compute one [`CheckOutcome`]
//!    per registered check and call [`render_root`].
//! 3. For [`HealthTarget::Check`], look the name up in the registry, compute that one outcome
//!    and call [`render_check`] (`None` when no check has that name).
//! 4. Send the [`HealthResponse`] with the headers in [`HEADERS`].
//!
//! The first 200 from the root of [`Endpoint::Readyz`] is what fires
//! [`LifecycleSignal::HasBeenReady`](crate::LifecycleSignal::HasBeenReady); the caller sees it in the status.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// `Content-Type` of every health response (Go's `http.Error` and kube's success path).
pub const CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// The `X-Content-Type-Options: nosniff` header kube sets on health responses.
pub const NOSNIFF: (&str, &str) = ("X-Content-Type-Options", "nosniff");

/// Every header a health response carries, as `(name, value)` pairs for an adapter to copy.
pub const HEADERS: [(&str, &str); 2] = [("Content-Type", CONTENT_TYPE), NOSNIFF];

/// Body of Go's `http.NotFound`, used for a check name that is not registered.
const NOT_FOUND_BODY: &str = "404 page not found\n";

/// Go's `url.ParseQuery` gives up on queries with more than this many `&`-separated parts
/// (Go 1.24.12 / 1.25.6 and later) and `URL.Query()` then sees no parameters at all.
const MAX_QUERY_PARAMS: usize = 10_000;

/// The three health endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// `/readyz`: whether the server should receive traffic; fails from `ShutdownInitiated`.
    Readyz,
    /// `/livez`: whether the process should be restarted.
    Livez,
    /// `/healthz`: the deprecated combined endpoint.
    Healthz,
}

impl Endpoint {
    /// Every endpoint, in the order above.
    pub const ALL: [Endpoint; 3] = [Endpoint::Readyz, Endpoint::Livez, Endpoint::Healthz];

    /// The endpoint's name as it appears in bodies (`readyz check failed`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Endpoint::Readyz => "readyz",
            Endpoint::Livez => "livez",
            Endpoint::Healthz => "healthz",
        }
    }

    /// The endpoint's root path (`/readyz`).
    #[must_use]
    pub const fn path(self) -> &'static str {
        match self {
            Endpoint::Readyz => "/readyz",
            Endpoint::Livez => "/livez",
            Endpoint::Healthz => "/healthz",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a request path asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HealthTarget<'a> {
    /// The endpoint's root: every check, rendered by [`render_root`].
    Root(Endpoint),
    /// One named check (`/readyz/<name>`), rendered by [`render_check`]. The name is the rest of
    /// the path and may contain `/` (`poststarthook/foo`).
    Check(Endpoint, &'a str),
}

impl HealthTarget<'_> {
    /// The endpoint the path belongs to.
    #[must_use]
    pub const fn endpoint(self) -> Endpoint {
        match self {
            HealthTarget::Root(endpoint) | HealthTarget::Check(endpoint, _) => endpoint,
        }
    }
}

/// Routes a request's path component (without the query) to a health target.
///
/// `/readyz` and `/readyz/` are the root; `/readyz/ping` is the check `ping` and
/// `/readyz/poststarthook/foo` the check `poststarthook/foo`. Anything else, `/readyzx` and
/// `/ready` included, is `None`. The path is matched as given, without percent-decoding, which
/// is why [`is_valid_check_name`] refuses `%`.
///
/// **Differs from kube-apiserver**, whose mux has no route for `/readyz/` (404): accepting the
/// trailing slash costs nothing and is what probes configured by hand tend to send.
///
/// Most paths are told apart at one byte, in line: a request path costs one look at it
/// before the full match.
#[must_use]
#[inline]
pub fn route(path: &str) -> Option<HealthTarget<'_>> {
    if !may_be_health(path) {
        return None;
    }
    route_health(path)
}

/// The byte after the `/` of every health endpoint's path, as a set (bit `b` for byte `b`).
const HEALTH_FIRST_BYTES: u128 = {
    let mut set = 0u128;
    let mut i = 0;
    while i < Endpoint::ALL.len() {
        set |= 1 << Endpoint::ALL[i].name().as_bytes()[0];
        i += 1;
    }
    set
};

/// Whether `path` may be a health endpoint's (a look at one byte, before the full match).
#[inline]
fn may_be_health(path: &str) -> bool {
    match path.as_bytes().get(1) {
        Some(&b) if b < 128 => HEALTH_FIRST_BYTES >> b & 1 == 1,
        _ => false,
    }
}

/// [`route`] past its one-byte look.
fn route_health(path: &str) -> Option<HealthTarget<'_>> {
    let rest = path.strip_prefix('/')?;
    Endpoint::ALL.into_iter().find_map(|endpoint| {
        let after = rest.strip_prefix(endpoint.name())?;
        match after.strip_prefix('/') {
            None if after.is_empty() => Some(HealthTarget::Root(endpoint)),
            None => None,
            Some("") => Some(HealthTarget::Root(endpoint)),
            Some(check) => Some(HealthTarget::Check(endpoint, check)),
        }
    })
}

/// Whether `name` is acceptable as a check name for a registry.
///
/// A name must be non-empty, free of whitespace and control characters (it is written into
/// line-based bodies), and free of `?`, `&`, `#` and `%` (it must be reachable unescaped as
/// `/<endpoint>/<name>` and usable as an `exclude` value). `/` separates segments, as in
/// `poststarthook/foo`; no segment may be empty, `.` or `..`, which clients would normalise away.
#[must_use]
pub fn is_valid_check_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '?' | '&' | '#' | '%'))
        && name
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// The parsed query of a health request: `verbose` and the `exclude` list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HealthQuery {
    verbose: bool,
    /// Decoded `exclude` values in query order, duplicates kept. Bytes, not `String`: as in Go,
    /// a percent-escape may decode to invalid UTF-8, and the warn line quotes such bytes as
    /// `\xff` the way Go does.
    exclude: Vec<Vec<u8>>,
}

impl HealthQuery {
    /// A query with neither `verbose` nor any `exclude`, as for a request without a query.
    #[must_use]
    pub fn new() -> HealthQuery {
        HealthQuery::default()
    }

    /// This query with the `verbose` key present or absent.
    #[must_use]
    pub fn with_verbose(mut self, verbose: bool) -> HealthQuery {
        self.verbose = verbose;
        self
    }

    /// This query with one more `exclude=<name>`.
    #[must_use]
    pub fn with_exclude(mut self, name: &str) -> HealthQuery {
        self.exclude.push(name.as_bytes().to_vec());
        self
    }

    /// Whether the `verbose` key is present, with any value (`verbose=false` included: kube
    /// checks the key's presence only).
    #[must_use]
    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// The decoded `exclude` values in query order, duplicates included. Values are bytes
    /// because a percent-escape may decode to invalid UTF-8.
    pub fn excludes(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.exclude.iter().map(Vec::as_slice)
    }

    /// Whether `name` is among the `exclude` values.
    #[must_use]
    pub fn is_excluded(&self, name: &str) -> bool {
        self.excludes().any(|e| e == name.as_bytes())
    }
}

/// Parses a raw query string (without the `?`) as Go's `URL.Query()` does.
///
/// Pairs are split on `&`, key from value on the first `=`; both are percent-decoded with `+`
/// meaning space. As in Go (which drops what `url.ParseQuery` reports as an error, pair by
/// pair), a pair containing `;` or a malformed escape (`%zz`, a trailing `%`) is skipped while
/// the other pairs still count, and a query of more than 10 000 parts yields no parameters.
/// Keys other than `verbose` and `exclude` are ignored. Never fails.
#[must_use]
pub fn parse_query(raw: Option<&str>) -> HealthQuery {
    let mut query = HealthQuery::new();
    let Some(raw) = raw else {
        return query;
    };
    if raw.bytes().filter(|&b| b == b'&').count() >= MAX_QUERY_PARAMS {
        return query;
    }
    for pair in raw.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(key), Some(value)) = (query_unescape(key), query_unescape(value)) else {
            continue;
        };
        match &*key {
            b"verbose" => query.verbose = true,
            b"exclude" => query.exclude.push(value.into_owned()),
            _ => {}
        }
    }
    query
}

/// Go's `url.QueryUnescape`: `%XX` (either case) is a byte, `+` is a space; `None` for a `%`
/// not followed by two hex digits. Borrows when there is nothing to decode.
fn query_unescape(s: &str) -> Option<Cow<'_, [u8]>> {
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| b == b'%' || b == b'+') {
        return Some(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let (&[hi, lo], tail) = rest.split_first_chunk::<2>()?;
                out.push(hex_value(hi)? << 4 | hex_value(lo)?);
                rest = tail;
            }
            _ => out.push(b),
        }
    }
    Some(Cow::Owned(out))
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// One check's outcome, computed by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CheckOutcome<'a> {
    /// The check's registered name (`ping`, `shutdown`, `poststarthook/foo`).
    pub name: &'a str,
    /// `Ok` when the check passes; `Err` carries the reason, shown only by [`render_check`].
    pub result: Result<(), &'a str>,
}

impl<'a> CheckOutcome<'a> {
    /// A passing check.
    #[must_use]
    pub const fn passed(name: &'a str) -> CheckOutcome<'a> {
        CheckOutcome {
            name,
            result: Ok(()),
        }
    }

    /// A failing check and its reason.
    #[must_use]
    pub const fn failed(name: &'a str, reason: &'a str) -> CheckOutcome<'a> {
        CheckOutcome {
            name,
            result: Err(reason),
        }
    }
}

/// A rendered health response. Its headers are the same for every response: [`HEADERS`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub struct HealthResponse {
    /// 200, 404 (unknown check) or 500.
    pub status: u16,
    /// The body, exactly as kube-apiserver writes it.
    pub body: String,
}

impl HealthResponse {
    fn new(status: u16, body: impl Into<String>) -> HealthResponse {
        HealthResponse {
            status,
            body: body.into(),
        }
    }
}

/// Renders the root of `endpoint` from every check's outcome, in registration order.
///
/// Each check contributes a line: `[+]<name> excluded: ok` when `exclude`d, else `[+]<name> ok`
/// or `[-]<name> failed: reason withheld` (the reason is never shown here). `exclude` values
/// that match no check add `warn: some health checks cannot be excluded: no matches for "a","b"`
/// (sorted, deduplicated, quoted as Go's `%q`). Then:
/// - some non-excluded check fails: 500, always verbose: the lines, then
///   `<endpoint> check failed\n`;
/// - all pass, `verbose` present: 200, the lines, then `<endpoint> check passed\n`;
/// - all pass otherwise: 200 `ok` (no newline, no warn line).
///
/// As in kube, an `exclude` value is used up by the first check of that name, so a second check
/// with the same name (which registries should refuse) still runs.
pub fn render_root(
    endpoint: Endpoint,
    checks: &[CheckOutcome<'_>],
    query: &HealthQuery,
) -> HealthResponse {
    // Go's `sets.Set[string]`: sorted and deduplicated here so that the leftovers come out in
    // `List()` order; the flag says whether the value has not been used up by a check yet.
    let mut excluded: Vec<(&[u8], bool)> = query.excludes().map(|e| (e, true)).collect();
    excluded.sort_unstable();
    excluded.dedup_by(|a, b| a.0 == b.0);

    let mut body = String::new();
    let mut failed = false;
    for check in checks {
        let unused = excluded
            .binary_search_by(|(e, _)| (*e).cmp(check.name.as_bytes()))
            .ok()
            .and_then(|i| excluded.get_mut(i))
            .filter(|(_, unused)| *unused);
        let (mark, suffix) = match (unused, check.result) {
            (Some((_, unused)), _) => {
                *unused = false;
                ("[+]", " excluded: ok\n")
            }
            (None, Ok(())) => ("[+]", " ok\n"),
            (None, Err(_)) => {
                failed = true;
                ("[-]", " failed: reason withheld\n")
            }
        };
        body.push_str(mark);
        body.push_str(check.name);
        body.push_str(suffix);
    }

    let mut leftovers = excluded.iter().filter(|(_, unused)| *unused).peekable();
    if leftovers.peek().is_some() {
        body.push_str("warn: some health checks cannot be excluded: no matches for ");
        for (i, (name, _)) in leftovers.enumerate() {
            if i > 0 {
                body.push(',');
            }
            push_go_quoted(&mut body, name);
        }
        body.push('\n');
    }

    let (status, verdict) = match (failed, query.verbose()) {
        (true, _) => (500, " check failed\n"),
        (false, true) => (200, " check passed\n"),
        (false, false) => return HealthResponse::new(200, "ok"),
    };
    body.push_str(endpoint.name());
    body.push_str(verdict);
    HealthResponse::new(status, body)
}

/// Renders `/<endpoint>/<name>` from that one check's outcome: 200 `ok`, or 500
/// `internal server error: <reason>\n`. `None` (no check of that name) gives Go's
/// `http.NotFound`: 404 `404 page not found\n`.
pub fn render_check(check: Option<&CheckOutcome<'_>>) -> HealthResponse {
    match check.map(|c| c.result) {
        None => HealthResponse::new(404, NOT_FOUND_BODY),
        Some(Ok(())) => HealthResponse::new(200, "ok"),
        Some(Err(reason)) => {
            let mut body = String::with_capacity(reason.len() + 23);
            body.push_str("internal server error: ");
            body.push_str(reason);
            body.push('\n');
            HealthResponse::new(500, body)
        }
    }
}

/// Appends `s` quoted as Go's `strconv.Quote` (`%q`): `"` and `\` escaped, the usual `\n`-style
/// escapes, other non-printable characters as `\xHH`, `\uHHHH` or `\UHHHHHHHH`, and each byte of
/// invalid UTF-8 as `\xHH`.
fn push_go_quoted(out: &mut String, s: &[u8]) {
    out.push('"');
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_go_quoted_char(out, c);
        }
        for &b in chunk.invalid() {
            push_hex_escape(out, 'x', b.into(), 2);
        }
    }
    out.push('"');
}

fn push_go_quoted_char(out: &mut String, c: char) {
    let escape = match c {
        '"' => "\\\"",
        '\\' => "\\\\",
        c if is_go_printable(c) => {
            out.push(c);
            return;
        }
        '\u{7}' => "\\a",
        '\u{8}' => "\\b",
        '\u{c}' => "\\f",
        '\n' => "\\n",
        '\r' => "\\r",
        '\t' => "\\t",
        '\u{b}' => "\\v",
        c if c < ' ' || c == '\u{7f}' => return push_hex_escape(out, 'x', c.into(), 2),
        c if u32::from(c) < 0x1_0000 => return push_hex_escape(out, 'u', c.into(), 4),
        c => return push_hex_escape(out, 'U', c.into(), 8),
    };
    out.push_str(escape);
}

/// `\<kind>` followed by the low `digits` hex digits of `value`, lower case as in Go.
fn push_hex_escape(out: &mut String, kind: char, value: u32, digits: u32) {
    out.push('\\');
    out.push(kind);
    for shift in (0..digits).rev() {
        let nibble = (value >> (shift * 4)) & 0xf;
        out.push(char::from_digit(nibble, 16).unwrap_or('0'));
    }
}

/// Go's `unicode.IsPrint` for the cases that occur in practice: letters, marks, numbers,
/// punctuation, symbols and the ASCII space are printable; control, format, private-use and
/// non-character code points and every space but U+0020 are not. `core` has no general-category
/// tables, so unassigned code points count as printable (Go escapes them).
fn is_go_printable(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, ' '..='~');
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let cp = u32::from(c);
    let format = matches!(
        cp,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(cp, 0xE000..=0xF8FF | 0xF_0000..=0xF_FFFD | 0x10_0000..=0x10_FFFD);
    let noncharacter = matches!(cp, 0xFDD0..=0xFDEF) || cp & 0xFFFE == 0xFFFE;
    !(format || private_use || noncharacter)
}

#[cfg(test)]
mod tests;
