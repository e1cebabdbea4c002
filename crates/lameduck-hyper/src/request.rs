//! A request's way through a server: the admission layer classifies it and admits it through
//! the gate (`admission`, with its settings in `layer`), the gate's ticket (`ticket`) is held
//! by the response body (`body`) until the response ends, a deadline (`deadline`) bounds it,
//! a long-running handler learns when to end its stream and when its turn comes (`notice`),
//! and the lifecycle answers some requests itself (`response`; `health` for routers that mount
//! the health endpoints; `goaway` for the draw that ends a connection now and then).

pub(crate) mod admission;
pub(crate) mod body;
pub(crate) mod deadline;
pub(crate) mod goaway;
pub(crate) mod health;
pub(crate) mod layer;
pub(crate) mod notice;
pub(crate) mod response;
pub(crate) mod ticket;
