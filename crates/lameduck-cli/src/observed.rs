//! `lameduck plan --observed FILE...`: what the servers' termination summaries show, the
//! shutdown delay that covers it ([`lameduck::plan::observed`] does the arithmetic), and, with
//! the load balancer's flags or `--deployment`, the model's plan next to it.

use std::fmt::Write as _;
use std::time::Duration;

use lameduck::config::DEFAULT_LATE_ARRIVAL_PERCENT;
use lameduck::duration::GoDuration;
use lameduck::plan::observed::{combine, recommend, ObservedRecommendation};
use lameduck::plan::Plan;

use crate::args::PlanArgs;
use crate::inputs::{self, InputError};
use crate::logs::{self, Logs};
use crate::{kube, report, svg, text, PlanFailure, PlanOutput};

mod wording;

pub use wording::verdict;
use wording::{count, d, figures, recommendation_alone, recommendation_with_model};

/// Runs `lameduck plan --observed`: reads the logs, and plans with the model too when the
/// load balancer's flags or `--deployment` are given.
///
/// # Errors
///
/// [`PlanFailure`]: a log that can not be used, a flag that needs the model, invalid input or
/// an output error.
pub fn run(args: &PlanArgs) -> Result<PlanOutput, PlanFailure> {
    let with_model = inputs::wants_model(args);
    if !with_model {
        if let Some(flag) = inputs::model_only_flag(args) {
            return Err(InputError::ObservedWithoutModel { flag }.into());
        }
    }
    let logs = logs::read_all(&args.observed)?;
    if with_model {
        with_the_model(args, &logs)
    } else {
        alone(args, &logs)
    }
}

/// Without the model: the logs' figures and recommendation.
fn alone(args: &PlanArgs, logs: &Logs) -> Result<PlanOutput, PlanFailure> {
    let r = recommend(
        &logs.total,
        args.shutdown_delay,
        DEFAULT_LATE_ARRIVAL_PERCENT,
    );
    let verdict = verdict(logs, &r);
    let notes = notes(logs, &r);
    let safe = r.verdict.is_ok();
    let stdout = if args.json.unwrap_or(false) {
        let observed = report::build_observed(logs, &r, None, &verdict, &notes);
        let mut s = serde_json::to_string_pretty(&report::ObservedOnlyReport {
            safe,
            verdict: verdict.clone(),
            observed,
        })?;
        s.push('\n');
        s
    } else {
        let mut s = String::from(
            "lameduck plan --observed (what the servers' termination summaries show)\n\n",
        );
        s.push_str(&figures(logs, &r));
        s.push('\n');
        let _ = writeln!(s, "observed       {verdict}");
        s.push_str(&recommendation_alone(logs, &r));
        for note in &notes {
            let _ = writeln!(s, "  note: {note}");
        }
        s
    };
    Ok(PlanOutput { stdout, safe })
}

/// With the model: its plan, the logs' figures, and the larger recommendation.
fn with_the_model(args: &PlanArgs, logs: &Logs) -> Result<PlanOutput, PlanFailure> {
    let mut gathered = inputs::gather(args)?;
    let configured = inputs::configured_shutdown_delay(args, &gathered);
    let mut extra_notes = Vec::new();
    if let (None, Some(observed)) = (configured, logs.total.shutdown_delay_min) {
        // The logs know the delay in use better than the default 0s.
        gathered.plan_input = inputs::with_shutdown_delay(&gathered.plan_input, observed)?;
        let note = format!(
            "no --shutdown-delay given: planned with the shortest observed shutdown delay, {}",
            GoDuration(observed)
        );
        match gathered.manifest.as_mut() {
            Some(context) => {
                let default = inputs::no_shutdown_delay_note(&context.manifest.container);
                context.notes.retain(|n| *n != default);
                context.notes.push(note);
            }
            None => extra_notes.push(note),
        }
    }
    let input = &gathered.plan_input;
    let plan = lameduck::plan::plan(input).map_err(InputError::from)?;
    let r = recommend(&logs.total, configured, DEFAULT_LATE_ARRIVAL_PERCENT);
    let combined = combine(&r, &plan);
    let verdict = verdict(logs, &r);
    let mut notes = notes(logs, &r);
    notes.extend(model_notes(logs, &plan));
    notes.extend(extra_notes);
    let plan_verdict = text::verdict(&plan);

    if let Some(path) = &args.svg {
        std::fs::write(path, svg::render(input, &plan)).map_err(|reason| PlanFailure::Svg {
            path: path.clone(),
            reason,
        })?;
    }
    let why = format!(
        "the larger of what the termination logs show ({}) and the model's worst-case detection \
         ({})",
        r.recommended
            .map_or_else(|| String::from("nothing"), |d| GoDuration(d).to_string()),
        GoDuration(combined.model)
    );
    let changes = match &gathered.manifest {
        Some(context) => Some(inputs::observed_changes(
            context,
            input,
            &plan,
            combined.recommended,
            &why,
        )?),
        None => None,
    };
    let kubernetes = if args.kubernetes.unwrap_or(false) {
        // The Deployment to apply: planned with the recommended delay.
        let mut rendered = format!("# lameduck plan --observed: {verdict}\n");
        if combined.recommended > plan.shutdown_delay {
            let _ = writeln!(
                rendered,
                "# --shutdown-delay {}: {why}",
                GoDuration(combined.recommended)
            );
            let better = inputs::with_shutdown_delay(input, combined.recommended)?;
            let better_plan = lameduck::plan::plan(&better).map_err(InputError::from)?;
            rendered.push_str(&kube::render(
                &better,
                &better_plan,
                &text::verdict(&better_plan),
            )?);
        } else {
            rendered.push_str(&kube::render(input, &plan, &plan_verdict)?);
        }
        Some(rendered)
    } else {
        None
    };

    let stdout = if args.json.unwrap_or(false) {
        let manifest = gathered.manifest.as_ref().zip(changes);
        let mut document =
            report::build(input, &plan, &plan_verdict, kubernetes.as_deref(), manifest);
        document.safe = combined.safe;
        document.observed = Some(report::build_observed(
            logs,
            &r,
            Some(&combined),
            &verdict,
            &notes,
        ));
        report::render(&document)?
    } else if let Some(yaml) = kubernetes {
        yaml
    } else {
        let mut s = String::new();
        if let Some(context) = &gathered.manifest {
            s.push_str(&text::manifest_header(context));
        }
        s.push_str(&text::render(input, &plan));
        s.push_str("\nobserved terminations (the servers' termination summaries):\n");
        s.push_str(&figures(logs, &r));
        s.push('\n');
        let _ = writeln!(s, "observed       {verdict}");
        s.push_str(&recommendation_with_model(logs, &r, &combined, &plan));
        for note in &notes {
            let _ = writeln!(s, "  note: {note}");
        }
        if let Some(changes) = &changes {
            s.push_str(&text::manifest_changes(changes));
        }
        if let Some(path) = &args.svg {
            let _ = writeln!(s, "timeline picture: {}", path.display());
        }
        s
    };
    Ok(PlanOutput {
        stdout,
        safe: combined.safe,
    })
}

/// With the model: a note when the logs contradict it.
fn model_notes(logs: &Logs, plan: &Plan) -> Vec<String> {
    match logs.total.last_new_connection {
        Some(last) if last > plan.detection_worst_case => vec![format!(
            "the logs contradict the model: a new connection came {} after the signal, later \
             than its worst-case detection {}; the load balancer's settings are not those given \
             (or it does not probe /readyz)",
            d(last),
            d(plan.detection_worst_case)
        )],
        _ => Vec::new(),
    }
}

/// Remarks on the observations.
pub fn notes(logs: &Logs, r: &ObservedRecommendation) -> Vec<String> {
    let o = &logs.total;
    let mut notes = Vec::new();
    if o.without_arrivals > 0 {
        let files: Vec<&str> = logs
            .files
            .iter()
            .filter(|f| f.observed.without_arrivals > 0)
            .map(|f| f.file.as_str())
            .collect();
        notes.push(format!(
            "{} ({}) {} no arrival fields: arrivals were not recorded by that server version, \
             so {} as without late connections",
            count(o.without_arrivals, "termination"),
            files.join(", "),
            if o.without_arrivals == 1 {
                "has"
            } else {
                "have"
            },
            if o.without_arrivals == 1 {
                "it counts"
            } else {
                "they count"
            }
        ));
    }
    if o.without_shutdown_delay > 0 {
        notes.push(format!(
            "{} never stopped accepting (lame_duck=-: the server exited before its shutdown \
             delay ran out): no shutdown delay was observed there",
            count(o.without_shutdown_delay, "termination")
        ));
    }
    if o.requests_before_ready > 0 {
        notes.push(format!(
            "the load balancer sends traffic before the readiness probe passes: {} arrived \
             before /readyz first answered ready (does it probe /readyz?)",
            count(o.requests_before_ready, "request")
        ));
    }
    if let (true, Some(c), Some(min)) = (r.configured, r.shutdown_delay, o.shutdown_delay_min) {
        let gap = c.abs_diff(min);
        if gap > Duration::from_millis(100) {
            notes.push(format!(
                "the logs show a shutdown delay of {} but {} is configured (pre-shutdown hooks \
                 lengthen it, another configuration changes it): the check uses {}",
                d(min),
                d(c),
                d(c)
            ));
        }
    }
    notes
}
