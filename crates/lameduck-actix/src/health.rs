//! [`health_routes`]: the health endpoints as routes of the app, for apps whose admission
//! middleware does not answer them itself.

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use lameduck::{Shared, StdClock};
use lameduck_hyper::Runtime as _;
use lameduck_tokio::TokioRuntime;

use crate::actix_response;

/// State of the health routes.
#[derive(Clone)]
struct HealthState {
    shared: Arc<Shared>,
    clock: StdClock,
}

async fn health(req: HttpRequest, state: web::Data<HealthState>) -> HttpResponse {
    let now = state.clock.instant(TokioRuntime.now());
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    match state.shared.health(req.path(), query, now) {
        Some(h) => actix_response(h).map_into_boxed_body(),
        None => HttpResponse::NotFound().body("404 page not found\n"),
    }
}

/// Registers `/readyz`, `/livez`, `/healthz` and `/<endpoint>/<check>` on an `App`, for an
/// [`AdmissionMiddleware`](crate::AdmissionMiddleware) that does not answer them itself ([`AdmissionMiddleware::serve_health`](crate::AdmissionMiddleware::serve_health)`(false)`), or
/// an app without it: `App::new().route(..).configure(health_routes(shared, clock))`.
/// Configure it after the app's own routes: actix tries routes in order, and these six
/// patterns (three of them regular expressions) would be tried on every request first.
pub fn health_routes(shared: Arc<Shared>, clock: StdClock) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        cfg.app_data(web::Data::new(HealthState { shared, clock }));
        for endpoint in ["/readyz", "/livez", "/healthz"] {
            cfg.route(endpoint, web::get().to(health));
            cfg.route(&format!("{endpoint}/{{check:.*}}"), web::get().to(health));
        }
    }
}
