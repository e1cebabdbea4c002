//! The items every adapter crate exposes, generated once: a TCP listener newtype with its
//! [`Listener`](crate::Listener) impl, `bind`, the `Server` alias and `builder`.

/// Generates an adapter's TCP listener, `bind`, `Server` and `builder` items.
///
/// ```text
/// lameduck_hyper::adapter_items! {
///     runtime: TokioRuntime = TokioRuntime,
///     listener: TokioListener(tokio::net::TcpListener),
///     io: TokioIo<tokio::net::TcpStream> = TokioIo::new,
/// }
/// ```
#[macro_export]
macro_rules! adapter_items {
    (
        runtime: $rt:ty = $rt_default:expr,
        listener: $name:ident($tcp:ty),
        io: $io:ty = $wrap:path $(,)?
    ) => {
        /// A TCP listener for [`lameduck_hyper::Server::serve`].
        #[derive(Debug)]
        pub struct $name(pub $tcp);

        impl $crate::Listener for $name {
            type Io = $io;

            async fn accept(&mut self) -> ::std::io::Result<(Self::Io, ::std::net::SocketAddr)> {
                let (stream, peer) = self.0.accept().await?;
                // Small responses go out at once; Nagle would hold them behind delayed ACKs.
                let _ = stream.set_nodelay(true);
                Ok(($wrap(stream), peer))
            }

            fn local_addr(&self) -> ::std::io::Result<::std::net::SocketAddr> {
                self.0.local_addr()
            }
        }

        /// Binds a TCP listener on `addr`.
        pub async fn bind(addr: ::std::net::SocketAddr) -> ::std::io::Result<$name> {
            Ok($name(<$tcp>::bind(addr).await?))
        }

        /// A prepared server on this runtime.
        pub type Server = $crate::Server<$rt>;

        /// Starts configuring a server on this runtime.
        #[must_use]
        pub fn builder(config: ::lameduck::Config) -> $crate::Builder<$rt> {
            $crate::Builder::new(config, $rt_default)
        }
    };
}
