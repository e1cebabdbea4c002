//! gRPC clients for the gRPC example server: tonic's channel over a real socket (optionally
//! with the server-to-client frames tapped, so GOAWAY is observable), the health client and
//! the example's `Demo` client.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use lameduck_examples_grpc::grpc::DemoClient;
use tonic::transport::{Channel, Endpoint};

use super::h2tap::{FrameTap, Seen};

pub use tonic_health::pb::health_check_response::ServingStatus;
pub use tonic_health::pb::health_client::HealthClient;
pub use tonic_health::pb::HealthCheckRequest;

fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect_timeout(Duration::from_secs(5))
}

/// A connected channel (one HTTP/2 connection).
pub async fn channel(addr: SocketAddr) -> Channel {
    endpoint(addr)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("gRPC connect to {addr}: {e}"))
}

/// A connected channel whose server-to-client frames are tapped.
pub async fn tapped_channel(addr: SocketAddr) -> (Channel, Arc<Mutex<Seen>>) {
    let slot: Arc<Mutex<Option<Arc<Mutex<Seen>>>>> = Arc::default();
    let put = Arc::clone(&slot);
    let channel = endpoint(addr)
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let put = Arc::clone(&put);
            async move {
                let stream = tokio::net::TcpStream::connect(addr).await?;
                stream.set_nodelay(true)?;
                let (tap, seen) = FrameTap::new(stream);
                *put.lock().expect("tap slot") = Some(seen);
                Ok::<_, std::io::Error>(TokioIo::new(tap))
            }
        }))
        .await
        .unwrap_or_else(|e| panic!("gRPC connect to {addr}: {e}"));
    let seen = slot
        .lock()
        .expect("tap slot")
        .take()
        .expect("connector ran");
    (channel, seen)
}

/// The example's `Demo` client on `channel`.
pub fn demo(channel: &Channel) -> DemoClient<Channel> {
    DemoClient::new(channel.clone())
}

/// The health status of `service` ("" for the server), or the call's error.
pub async fn check(channel: &Channel, service: &str) -> Result<ServingStatus, tonic::Status> {
    let reply = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await?;
    Ok(ServingStatus::try_from(reply.get_ref().status).unwrap_or(ServingStatus::Unknown))
}
