//! async-tungstenite on smol over an upgraded hyper connection: `websocket::UpgradedIo` (hyper's
//! I/O traits as futures-io) carries the frames both ways, and the goodbye `TUNGSTENITE` makes
//! reaches the client as Close 1001 with its reason.

#![cfg(feature = "tungstenite")]

use std::time::Duration;

use async_tungstenite::tungstenite::protocol::Role;
use async_tungstenite::tungstenite::Message;
use async_tungstenite::WebSocketStream;
use futures_util::StreamExt;
use lameduck_smol::websocket::{UpgradedIo, GOING_AWAY, GOING_AWAY_REASON, TUNGSTENITE};
use smol_hyper::rt::FuturesIo;

#[test]
fn async_tungstenite_speaks_through_an_upgraded_connection() {
    let test = async {
        let listener = async_net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) =
            futures_lite::future::zip(async_net::TcpStream::connect(addr), listener.accept()).await;
        let (client, (server, _)) = (client.unwrap(), accepted.unwrap());
        // The server's end as hyper hands over an upgraded connection (hyper's I/O traits),
        // and back to futures-io for async-tungstenite.
        let server = UpgradedIo(FuturesIo::new(server));
        let mut server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let mut client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
        client.send(Message::text("hi")).await.unwrap();
        let echo = server.next().await.unwrap().unwrap();
        server.send(echo).await.unwrap();
        assert_eq!(client.next().await.unwrap().unwrap(), Message::text("hi"));
        let goodbye = (TUNGSTENITE.close)(GOING_AWAY, GOING_AWAY_REASON);
        assert!((TUNGSTENITE.is_close)(&goodbye));
        server.send(goodbye).await.unwrap();
        match client.next().await.unwrap().unwrap() {
            Message::Close(Some(frame)) => {
                assert_eq!(u16::from(frame.code), 1001);
                assert_eq!(frame.reason.as_str(), GOING_AWAY_REASON);
            }
            other => panic!("not the goodbye: {other:?}"),
        }
    };
    let bound = async {
        async_io::Timer::after(Duration::from_secs(10)).await;
        panic!("the exchange took over 10 s");
    };
    smol::block_on(futures_lite::future::or(test, bound));
}
