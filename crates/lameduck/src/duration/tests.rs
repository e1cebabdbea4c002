//! Unit tests of [`crate::duration`].

use super::*;
use alloc::string::ToString;

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const M: u64 = 60 * S;
const H: u64 = 60 * M;

fn nanos(n: u64) -> Duration {
    Duration::from_nanos(n)
}

#[test]
fn go_grammar_valid() {
    // Mostly Go's own parseDurationTests, minus the negative non-zero cases.
    let cases: &[(&str, u64)] = &[
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-0", 0),
        ("+0", 0),
        ("-0s", 0),
        ("+5s", 5 * S),
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        ("10ns", 10 * NS),
        ("11us", 11 * US),
        ("12µs", 12 * US),
        ("12μs", 12 * US),
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * M),
        ("16h", 16 * H),
        ("3h30m", 3 * H + 30 * M),
        ("1h30m", H + 30 * M),
        ("1m30s", M + 30 * S),
        ("500ms", 500 * MS),
        ("1.5h", H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("1h1m1s1ms1us1ns", H + M + S + MS + US + NS),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        ("52763797000ns", 52_763_797_000),
        // Go's float arithmetic rounds this one up to 20m; exact integer arithmetic
        // truncates it, as it does every fraction finer than a nanosecond.
        ("0.3333333333333333333h", 20 * M - 1),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", i64::MAX as u64),
        ("9223372036854775.807us", i64::MAX as u64),
        ("9223372036s854ms775us807ns", i64::MAX as u64),
        ("2562047h47m16.854775807s", i64::MAX as u64),
        ("0.100000000000000000000h", 6 * M),
        ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
        ("0.9999999999s", 999_999_999),
        ("1.9999999999ns", 1),
        ("00s", 0),
        ("0h0m0s", 0),
    ];
    for &(input, want) in cases {
        assert_eq!(parse_duration(input), Ok(nanos(want)), "input {input:?}");
    }
    assert_eq!(parse_duration("2562047h47m16.854775807s"), Ok(MAX_DURATION));
}

#[test]
fn go_grammar_invalid() {
    let s = String::from;
    let cases: &[(&str, DurationError)] = &[
        ("", DurationError::Empty),
        ("3", DurationError::MissingUnit { input: s("3") }),
        ("10", DurationError::MissingUnit { input: s("10") }),
        ("00", DurationError::MissingUnit { input: s("00") }),
        ("1h30", DurationError::MissingUnit { input: s("1h30") }),
        ("1..5s", DurationError::MissingUnit { input: s("1..5s") }),
        ("-", DurationError::Invalid { input: s("-") }),
        ("+", DurationError::Invalid { input: s("+") }),
        ("s", DurationError::Invalid { input: s("s") }),
        (".", DurationError::Invalid { input: s(".") }),
        ("-.", DurationError::Invalid { input: s("-.") }),
        (".s", DurationError::Invalid { input: s(".s") }),
        ("+.s", DurationError::Invalid { input: s("+.s") }),
        ("abc", DurationError::Invalid { input: s("abc") }),
        ("--1s", DurationError::Invalid { input: s("--1s") }),
        (" 1s", DurationError::Invalid { input: s(" 1s") }),
        (
            "1d",
            DurationError::UnknownUnit {
                unit: s("d"),
                input: s("1d"),
            },
        ),
        (
            "1x",
            DurationError::UnknownUnit {
                unit: s("x"),
                input: s("1x"),
            },
        ),
        (
            "1 s",
            DurationError::UnknownUnit {
                unit: s(" s"),
                input: s("1 s"),
            },
        ),
        (
            "1sm",
            DurationError::UnknownUnit {
                unit: s("sm"),
                input: s("1sm"),
            },
        ),
        (
            "1S",
            DurationError::UnknownUnit {
                unit: s("S"),
                input: s("1S"),
            },
        ),
        (
            "1µ",
            DurationError::UnknownUnit {
                unit: s("µ"),
                input: s("1µ"),
            },
        ),
        ("-1s", DurationError::Negative { input: s("-1s") }),
        ("-1.5h", DurationError::Negative { input: s("-1.5h") }),
        (
            "-0.000000001s",
            DurationError::Negative {
                input: s("-0.000000001s"),
            },
        ),
        (
            "9999999999h",
            DurationError::Overflow {
                input: s("9999999999h"),
            },
        ),
        (
            "-9999999999h",
            DurationError::Overflow {
                input: s("-9999999999h"),
            },
        ),
        (
            "9223372036854775808ns",
            DurationError::Overflow {
                input: s("9223372036854775808ns"),
            },
        ),
        (
            "9223372036854775.808us",
            DurationError::Overflow {
                input: s("9223372036854775.808us"),
            },
        ),
        (
            "2562047h47m16.854775808s",
            DurationError::Overflow {
                input: s("2562047h47m16.854775808s"),
            },
        ),
        (
            "9223372036854775807ns1ns",
            DurationError::Overflow {
                input: s("9223372036854775807ns1ns"),
            },
        ),
        (
            "99999999999999999999999s",
            DurationError::Overflow {
                input: s("99999999999999999999999s"),
            },
        ),
        (
            "3000000h",
            DurationError::Overflow {
                input: s("3000000h"),
            },
        ),
    ];
    for (input, want) in cases {
        assert_eq!(parse_duration(input).as_ref(), Err(want), "input {input:?}");
        assert_eq!(want.input(), *input);
    }
}

#[test]
fn error_messages_show_the_input() {
    let msg = |s: &str| parse_duration(s).unwrap_err().to_string();
    assert_eq!(msg(""), r#"invalid duration "": empty string"#);
    assert_eq!(
        msg("10"),
        r#"invalid duration "10": missing unit (use one of ns, us, µs, ms, s, m, h)"#
    );
    assert_eq!(
        msg("1x"),
        r#"invalid duration "1x": unknown unit "x" (use one of ns, us, µs, ms, s, m, h)"#
    );
    assert_eq!(
        msg("-1s"),
        r#"invalid duration "-1s": can not be a negative value"#
    );
    assert_eq!(
        msg("abc"),
        r#"invalid duration "abc": expected numbers with units, such as 500ms, 2s or 1m30s"#
    );
    assert_eq!(
        msg("9999999999h"),
        r#"invalid duration "9999999999h": longer than the maximum 2562047h47m16.854775807s"#
    );
}

#[test]
fn go_formatting() {
    // Go's durationTests.
    let cases: &[(&str, u64)] = &[
        ("0s", 0),
        ("1ns", NS),
        ("1.1µs", 1100 * NS),
        ("2.2ms", 2200 * US),
        ("3.3s", 3300 * MS),
        ("4m5s", 4 * M + 5 * S),
        ("4m5.001s", 4 * M + 5001 * MS),
        ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
        ("8m0.000000001s", 8 * M + NS),
        ("2562047h47m16.854775807s", i64::MAX as u64),
        ("1.5s", 1500 * MS),
        ("1m30s", 90 * S),
        ("500ms", 500 * MS),
        ("1h0m0s", H),
        ("1m0s", M),
        ("2µs", 2 * US),
        ("1.000001ms", MS + NS),
        ("999ns", 999),
        ("59.999999999s", M - 1),
    ];
    for &(want, n) in cases {
        assert_eq!(format_duration(nanos(n)).to_string(), want);
    }
    assert_eq!(
        format_duration(Duration::MAX).to_string(),
        "5124095576030431h0m15.999999999s"
    );
    assert_eq!(alloc::format!("[{:>6}]", GoDuration(nanos(S))), "[    1s]");
}

#[test]
fn round_trip() {
    let max = i64::MAX as u64;
    let mut values: alloc::vec::Vec<u64> =
        alloc::vec![0, 1, 999, 1000, MS, S - 1, S, M, H, max, max - 1];
    // A deterministic spread over every magnitude: powers, neighbours and an LCG.
    let mut p: u64 = 1;
    while p < max / 7 {
        values.extend([p - 1, p, p + 1, p * 3 + 7]);
        p *= 7;
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let shift = (x >> 58) as u32; // 0..63
        values.push((x >> 1) >> shift);
    }
    for n in values {
        let d = nanos(n);
        let text = format_duration(d).to_string();
        assert_eq!(parse_duration(&text), Ok(d), "{n} ns printed as {text:?}");
    }
}

#[test]
fn no_panic_on_odd_input() {
    for input in [
        "µ",
        "μ",
        "1µ",
        "1.µs",
        "1.\u{0}s",
        "\u{1F600}",
        "1\u{1F600}",
        "0.",
        "0.s",
        ".0s",
        "-0.0s",
        "1e9s",
        "0x10s",
        "١s",
        "1_000s",
        "1.2.3s",
    ] {
        let _ = parse_duration(input);
    }
    assert_eq!(parse_duration("0.s"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("-0.0s"), Ok(Duration::ZERO));
}
