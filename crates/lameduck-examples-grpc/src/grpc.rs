//! The gRPC example server's service (`docs/design.md#grpc`), written without code
//! generation: the messages are `prost` derives and the service is served with
//! `tonic::server::Grpc`, as tonic-build's output would be.
//!
//! ```text
//! package lameduck.example;
//! service Demo {
//!   rpc Sleep(SleepRequest) returns (SleepReply);        // sleeps `duration`, then answers
//!   rpc Ticks(TicksRequest) returns (stream Tick);       // a tick every 500 ms until told to end
//! }
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{self, Stream};
use http::{Request, Response};
use lameduck_tonic::ShutdownNotice;
use tonic::body::Body;
use tonic::server::{NamedService, ServerStreamingService, UnaryService};
use tonic::{Status, Streaming};

/// The service's full name.
pub const SERVICE: &str = "lameduck.example.Demo";
/// The path of the unary `Sleep` method.
pub const SLEEP: &str = "/lameduck.example.Demo/Sleep";
/// The path of the server-streaming `Ticks` method.
pub const TICKS: &str = "/lameduck.example.Demo/Ticks";
/// The interval between two ticks of `Ticks`.
pub const TICK_INTERVAL: Duration = Duration::from_millis(500);

/// `Sleep`'s request: a Go-style duration (`500ms`, `2s`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SleepRequest {
    /// How long to sleep.
    #[prost(string, tag = "1")]
    pub duration: String,
}

/// `Sleep`'s answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SleepReply {
    /// `Welcome gRPC Server`.
    #[prost(string, tag = "1")]
    pub message: String,
}

/// `Ticks`'s request (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TicksRequest {}

/// One message of `Ticks`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Tick {
    /// 0, 1, 2, ...
    #[prost(uint64, tag = "1")]
    pub n: u64,
}

/// The `Demo` service, for `tonic::service::Routes::add_service`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Demo;

impl NamedService for Demo {
    const NAME: &'static str = SERVICE;
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

struct SleepSvc;

impl UnaryService<SleepRequest> for SleepSvc {
    type Response = SleepReply;
    type Future = BoxFuture<Result<tonic::Response<SleepReply>, Status>>;

    fn call(&mut self, request: tonic::Request<SleepRequest>) -> Self::Future {
        Box::pin(async move {
            let d = lameduck::parse_duration(&request.get_ref().duration)
                .map_err(|e| Status::invalid_argument(format!("duration: {e}")))?;
            tokio::time::sleep(d).await;
            Ok(tonic::Response::new(SleepReply {
                message: "Welcome gRPC Server".into(),
            }))
        })
    }
}

/// The ticks: one at once, then one every [`TICK_INTERVAL`], until `notice` fires (never
/// without one); then the stream ends, and with it the call, with status OK.
pub fn ticks(notice: Option<ShutdownNotice>) -> impl Stream<Item = Result<Tick, Status>> + Send {
    let end = notice.map(|n| Box::pin(n.wait()));
    stream::unfold((0u64, end), |(n, mut end)| async move {
        if n > 0 {
            let tick = std::pin::pin!(tokio::time::sleep(TICK_INTERVAL));
            match end.as_mut() {
                Some(notice) => {
                    if let futures_util::future::Either::Right(_) =
                        futures_util::future::select(tick, notice.as_mut()).await
                    {
                        return None;
                    }
                }
                None => tick.await,
            }
        }
        Some((Ok(Tick { n }), (n + 1, end)))
    })
}

struct TicksSvc;

type TickStream = Pin<Box<dyn Stream<Item = Result<Tick, Status>> + Send + 'static>>;

impl ServerStreamingService<TicksRequest> for TicksSvc {
    type Response = Tick;
    type ResponseStream = TickStream;
    type Future = BoxFuture<Result<tonic::Response<TickStream>, Status>>;

    fn call(&mut self, request: tonic::Request<TicksRequest>) -> Self::Future {
        let notice = lameduck_tonic::shutdown_notice(&request);
        Box::pin(async move { Ok(tonic::Response::new(Box::pin(ticks(notice)) as TickStream)) })
    }
}

fn codec<T, U>() -> tonic_prost::ProstCodec<T, U> {
    tonic_prost::ProstCodec::default()
}

impl tower::Service<Request<Body>> for Demo {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        match req.uri().path() {
            SLEEP => {
                Box::pin(
                    async move { Ok(tonic::server::Grpc::new(codec()).unary(SleepSvc, req).await) },
                )
            }
            TICKS => Box::pin(async move {
                Ok(tonic::server::Grpc::new(codec())
                    .server_streaming(TicksSvc, req)
                    .await)
            }),
            _ => Box::pin(async move {
                let (parts, ()) = Status::unimplemented("").into_http::<()>().into_parts();
                Ok(Response::from_parts(parts, Body::empty()))
            }),
        }
    }
}

/// A client of `Demo` over any tonic transport (a `tonic::transport::Channel`).
#[derive(Clone, Debug)]
pub struct DemoClient<T> {
    inner: tonic::client::Grpc<T>,
}

impl<T> DemoClient<T>
where
    T: tonic::client::GrpcService<Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    /// A client over `transport`.
    pub fn new(transport: T) -> Self {
        DemoClient {
            inner: tonic::client::Grpc::new(transport),
        }
    }

    async fn ready(&mut self) -> Result<(), Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| Status::unknown(format!("service was not ready: {}", e.into())))
    }

    /// Calls `Sleep`.
    pub async fn sleep(
        &mut self,
        request: impl tonic::IntoRequest<SleepRequest>,
    ) -> Result<tonic::Response<SleepReply>, Status> {
        self.ready().await?;
        let path = http::uri::PathAndQuery::from_static(SLEEP);
        self.inner
            .unary(request.into_request(), path, codec())
            .await
    }

    /// Calls `Ticks`.
    pub async fn ticks(
        &mut self,
        request: impl tonic::IntoRequest<TicksRequest>,
    ) -> Result<tonic::Response<Streaming<Tick>>, Status> {
        self.ready().await?;
        let path = http::uri::PathAndQuery::from_static(TICKS);
        self.inner
            .server_streaming(request.into_request(), path, codec())
            .await
    }
}

/// One service for both kinds of request on one port: gRPC calls (content-type
/// `application/grpc*`) to `grpc`, the others to `http`.
pub fn with_http<G, H, HB>(
    grpc: G,
    http: H,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone
       + Send
       + 'static
where
    G: tower::Service<
            Request<hyper::body::Incoming>,
            Response = Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    G::Future: Send,
    H: tower::Service<Request<hyper::body::Incoming>, Response = Response<HB>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    H::Future: Send,
    HB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    HB::Error: Into<tonic::codegen::StdError>,
{
    tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        let grpc = grpc.clone();
        let http = http.clone();
        async move {
            if lameduck_hyper::grpc::is_grpc(req.headers()) {
                tower::ServiceExt::oneshot(grpc, req).await
            } else {
                let res = tower::ServiceExt::oneshot(http, req).await?;
                Ok(res.map(Body::new))
            }
        }
    })
}
