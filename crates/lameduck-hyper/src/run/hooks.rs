//! Running hooks: the machine names which hooks to run and when ([`lameduck::Event`]s); this
//! module runs them on the runtime, catches failures and panics, and reports each with
//! [`Input::HookFinished`].

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

use futures_channel::mpsc;
use futures_util::FutureExt;
use lameduck::machine::{HookId, HookKind, HookOutcome};
use lameduck::{Input, Lifecycle, Running};

use crate::error::BoxError;
use crate::logging;
use crate::runtime::{BoxFuture, Runtime};

/// A registered hook, boxed; see [`crate::Hook`].
pub(crate) type HookFn = Box<dyn FnOnce() -> BoxFuture<Result<(), BoxError>> + Send>;

/// The hooks registered with the builder, by the id the machine gave each.
pub(crate) type Hooks = HashMap<HookId, HookFn>;

/// How a hook ended.
enum Ended {
    Succeeded,
    Failed(BoxError),
    Panicked,
}

/// Runs `hook` to its end, catching a panic.
async fn run(hook: HookFn) -> Ended {
    match AssertUnwindSafe(async move { hook().await })
        .catch_unwind()
        .await
    {
        Ok(Ok(())) => Ended::Succeeded,
        Ok(Err(e)) => Ended::Failed(e),
        Err(_) => Ended::Panicked,
    }
}

/// Runs every hook of `kind` concurrently, each in a task of its own that reports it.
pub(crate) fn spawn_hooks<R: Runtime>(
    runtime: &R,
    lc: &Lifecycle<Running>,
    kind: HookKind,
    hooks: &mut Hooks,
    tx: &mpsc::UnboundedSender<Input>,
) {
    let ids: Vec<(HookId, String)> = lc
        .machine()
        .hooks(kind)
        .map(|(id, name)| (id, name.to_string()))
        .collect();
    for (id, name) in ids {
        let Some(hook) = hooks.remove(&id) else {
            continue;
        };
        let tx = tx.clone();
        runtime.spawn(async move {
            let outcome = match run(hook).await {
                Ended::Succeeded => HookOutcome::Succeeded,
                Ended::Failed(e) => {
                    logging::hook_returned_error(&name, kind, &e);
                    HookOutcome::Failed
                }
                Ended::Panicked => {
                    logging::hook_panicked(&name, kind);
                    HookOutcome::Panicked
                }
            };
            let _ = tx.unbounded_send(Input::HookFinished { hook: id, outcome });
        });
    }
}

/// Runs the destroy hooks one after the other, in registration order, reporting each; the
/// machine bounds them with [`lameduck::machine::DESTROY_HOOKS_TIMEOUT`] and exits at once on a second
/// signal.
pub(crate) fn spawn_destroy_hooks<R: Runtime>(
    runtime: &R,
    lc: &Lifecycle<Running>,
    hooks: &mut Hooks,
    tx: &mpsc::UnboundedSender<Input>,
) {
    let ordered: Vec<(HookId, String, HookFn)> = lc
        .machine()
        .hooks(HookKind::Destroy)
        .filter_map(|(id, name)| Some((id, name.to_string(), hooks.remove(&id)?)))
        .collect();
    let tx = tx.clone();
    runtime.spawn(async move {
        for (id, name, hook) in ordered {
            let outcome = match run(hook).await {
                Ended::Succeeded => HookOutcome::Succeeded,
                Ended::Failed(e) => {
                    logging::destroy_hook_failed(&name, &e);
                    HookOutcome::Failed
                }
                Ended::Panicked => {
                    logging::destroy_hook_panicked(&name);
                    HookOutcome::Panicked
                }
            };
            if tx
                .unbounded_send(Input::HookFinished { hook: id, outcome })
                .is_err()
            {
                return;
            }
        }
    });
}
