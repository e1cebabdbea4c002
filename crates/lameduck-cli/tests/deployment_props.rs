//! Arbitrary `--deployment` input never panics: random text, random edits of a real manifest,
//! and random JSON trees in the places a Deployment's fields go, as YAML and as JSON, through
//! the manifest reader, the merge with the flags, the planner and every output.

use std::path::Path;

use lameduck_cli::args::PlanArgs;
use lameduck_cli::{deployment, inputs, kube, report, svg, text};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const AWS: &str = include_str!("fixtures/aws.yaml");
const PRESTOP: &str = include_str!("fixtures/prestop.json");

/// Everything `lameduck plan --deployment` does with `text`, minus the process; errors are
/// fine, panics are not. True when it got as far as the outputs.
fn run(text: &str, container: Option<&str>) -> bool {
    let Ok(manifest) = deployment::parse(text, None, container) else {
        return false;
    };
    let args = PlanArgs::default();
    let Ok(gathered) = inputs::merge(&args, Some(manifest), Some(Path::new("f.yaml"))) else {
        return false;
    };
    let input = &gathered.plan_input;
    let Ok(plan) = lameduck::plan::plan(input) else {
        return false;
    };
    let verdict = text::verdict(&plan);
    let context = gathered.manifest.as_ref().expect("a manifest was given");
    let changes = inputs::changes(context, &plan);
    let _ = text::manifest_header(context) + &text::render(input, &plan);
    let _ = svg::render(input, &plan);
    let yaml = kube::render(input, &plan, &verdict).expect("the Deployment serializes");
    let json = report::render(&report::build(
        input,
        &plan,
        &verdict,
        Some(&yaml),
        Some((context, changes)),
    ))
    .expect("the report serializes");
    let _: report::PlanReport = serde_json::from_str(&json).expect("the report reads back");
    // The library's entry point, as the fuzz target calls it.
    let args = PlanArgs {
        json: Some(true),
        kubernetes: Some(true),
        container: container.map(str::to_string),
        ..PlanArgs::default()
    };
    let output = lameduck_cli::run_plan_on_manifest(&args, text).expect("planned above");
    assert_eq!(output.safe, plan.is_safe());
    true
}

/// Random JSON values, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-5i64..200).prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("--shutdown-delay=30s"),
            Just("--shutdown-delay"),
            Just("30s"),
            Just("--request-timeout=$(X)"),
            Just("--shutdown-send-retry-after=maybe"),
            Just("sleep"),
            Just("/readyz"),
            Just("-5s"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-zA-Z]{1,8}",
                    Just("periodSeconds".to_string()),
                    Just("httpGet".to_string()),
                    Just("exec".to_string()),
                    Just("command".to_string()),
                    Just("sleep".to_string()),
                    Just("seconds".to_string()),
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// The JSON pointers of a Deployment's fields the planner reads, and some around them.
const PLACES: [&str; 10] = [
    "/spec",
    "/spec/template",
    "/spec/template/spec",
    "/spec/template/spec/containers",
    "/spec/template/spec/containers/0",
    "/spec/template/spec/containers/0/readinessProbe",
    "/spec/template/spec/containers/0/readinessProbe/periodSeconds",
    "/spec/template/spec/containers/0/args",
    "/spec/template/spec/containers/0/lifecycle/preStop",
    "/spec/template/spec/terminationGracePeriodSeconds",
];

/// The prestop fixture with `replacement` at `place`.
fn with(place: &str, replacement: Value) -> Value {
    let mut doc: Value = serde_json::from_str(PRESTOP).unwrap();
    let (parent, key) = place.rsplit_once('/').unwrap();
    let parent = if parent.is_empty() {
        Some(&mut doc)
    } else {
        doc.pointer_mut(parent)
    };
    match parent {
        Some(Value::Object(map)) => {
            map.insert(key.to_string(), replacement);
        }
        Some(Value::Array(items)) => {
            if let Some(slot) = key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = replacement;
            }
        }
        _ => {}
    }
    doc
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_text_never_panics(text in "(?s).{0,200}") {
        run(&text, None);
    }

    #[test]
    fn random_edits_of_a_manifest_never_panic(
        cut in 0usize..2000,
        insert in "(?s).{0,16}",
        yaml in any::<bool>(),
    ) {
        let base = if yaml { AWS } else { PRESTOP };
        let mut at = cut % (base.len() + 1);
        while !base.is_char_boundary(at) {
            at -= 1;
        }
        let edited = format!("{}{insert}{}", &base[..at], &base[at..]);
        run(&edited, None);
        run(&base[..at], Some("checkout"));
    }

    #[test]
    fn random_fields_never_panic(place in 0usize..PLACES.len(), replacement in value()) {
        let doc = with(PLACES[place], replacement);
        run(&serde_json::to_string(&doc).unwrap(), None);
        run(&serde_norway::to_string(&doc).unwrap(), None);
        run(&format!("---\n{}---\n", serde_norway::to_string(&doc).unwrap()), Some("api"));
    }
}

#[test]
fn the_fixtures_and_extreme_values_run_clean() {
    assert!(run(AWS, None));
    assert!(run(PRESTOP, None));
    let probe = "/spec/template/spec/containers/0/readinessProbe";
    for (place, value) in [
        (format!("{probe}/periodSeconds"), json!(i32::MAX)),
        (format!("{probe}/timeoutSeconds"), json!(i32::MAX)),
        (format!("{probe}/failureThreshold"), json!(i32::MAX)),
        (
            "/spec/template/spec/terminationGracePeriodSeconds".to_string(),
            json!(i64::MAX),
        ),
        (
            "/spec/template/spec/containers/0/lifecycle".to_string(),
            json!({"preStop": {"sleep": {"seconds": i64::MAX}}}),
        ),
        (
            "/spec/template/spec/containers/0/args".to_string(),
            json!([
                "--shutdown-delay=2562047h47m16s",
                "--request-timeout=2562047h"
            ]),
        ),
    ] {
        let doc = with(&place, value);
        run(&serde_json::to_string(&doc).unwrap(), None);
        run(&serde_norway::to_string(&doc).unwrap(), None);
    }
}
