//! Request bodies the layer can send again: those whose whole content is known before the
//! first attempt and no larger than the limit. A body whose content comes later (a stream,
//! or anything past the limit) is sent once, as it is, and never replayed.
//!
//! - `Empty` and `Full` are known whole: kept as a clone (for `Full<Bytes>` a reference
//!   count), nothing copied.
//! - `String`: kept as a copy (allocates; use `Full<Bytes>` on hot paths).
//! - Boxed bodies (`BoxBody`, `UnsyncBoxBody`, and tonic's request body with the `tonic`
//!   feature) are collected before the first attempt while their frames are ready, up to the
//!   limit: a unary gRPC call's message is ready at once. The collected bytes are sent (and
//!   kept to be sent again). A body that is not ready, larger than the limit, or that has
//!   trailers or an error is sent as it came: the frames read so far, then the rest of it;
//!   it is never replayed.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt, Empty, Full};

/// A request body the layer knows how to send again.
///
/// `prepare` is called once per request, before the first attempt: it returns the body to
/// send and, when the body's whole content is known and at most `limit` bytes, what to keep
/// to send it again; `replay` makes a new body from what was kept. A body that returns no copy
/// is sent once: its request is never retried.
pub trait ReplayBody: Body + Sized {
    /// What the layer keeps to send the body again.
    type Saved: Send + Sync + 'static;

    /// The body to send first, and what to keep to send it again (`None`: never replayed).
    fn prepare(self, limit: usize) -> (Self, Option<Self::Saved>);

    /// The body to send again.
    fn replay(saved: &Self::Saved) -> Self;
}

impl<D: bytes::Buf + Send + 'static> ReplayBody for Empty<D> {
    type Saved = ();

    fn prepare(self, _limit: usize) -> (Self, Option<()>) {
        (self, Some(()))
    }

    fn replay(_: &()) -> Self {
        Empty::new()
    }
}

impl<D: bytes::Buf + Clone + Send + Sync + 'static> ReplayBody for Full<D> {
    type Saved = Full<D>;

    fn prepare(self, limit: usize) -> (Self, Option<Full<D>>) {
        let known_small = self.size_hint().upper().is_some_and(|n| n <= limit as u64);
        let saved = known_small.then(|| self.clone());
        (self, saved)
    }

    fn replay(saved: &Full<D>) -> Self {
        saved.clone()
    }
}

impl ReplayBody for String {
    type Saved = String;

    fn prepare(self, limit: usize) -> (Self, Option<String>) {
        let saved = (self.len() <= limit).then(|| self.clone());
        (self, saved)
    }

    fn replay(saved: &String) -> Self {
        saved.clone()
    }
}

/// The whole content of a collected body (see the module's description), kept to send it
/// again.
#[derive(Clone, Debug)]
pub struct Collected {
    data: Bytes,
}

impl Collected {
    /// The bytes collected.
    pub fn data(&self) -> &Bytes {
        &self.data
    }
}

/// What reading a body's ready frames gave.
pub(crate) enum Collect<B: Body> {
    /// Its whole content, within the limit.
    Whole(Bytes),
    /// The body to send as it came, never replayed: the frames read, then the rest.
    Partial(Prefixed<B>),
}

/// Reads `body`'s frames while they are ready, up to `limit` bytes of data.
pub(crate) fn collect_ready<B>(mut body: B, limit: usize) -> Collect<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut prefix = Prefixed {
        frames: VecDeque::new(),
        error: None,
        rest: None,
    };
    if body.is_end_stream() {
        return Collect::Whole(Bytes::new());
    }
    if body.size_hint().lower() > limit as u64 {
        prefix.rest = Some(body);
        return Collect::Partial(prefix);
    }
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    let mut total = 0usize;
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(None) => break,
            Poll::Ready(Some(Ok(frame))) => {
                let is_data = frame.is_data();
                let len = frame.data_ref().map_or(0, Bytes::len);
                prefix.frames.push_back(frame);
                total = total.saturating_add(len);
                if !is_data || total > limit {
                    prefix.rest = Some(body);
                    return Collect::Partial(prefix);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                prefix.error = Some(e);
                return Collect::Partial(prefix);
            }
            Poll::Pending => {
                prefix.rest = Some(body);
                return Collect::Partial(prefix);
            }
        }
    }
    let data = match prefix.frames.len() {
        0 => Bytes::new(),
        1 => prefix
            .frames
            .pop_front()
            .and_then(|f| f.into_data().ok())
            .unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(total);
            for f in prefix.frames {
                if let Some(d) = f.data_ref() {
                    all.extend_from_slice(d);
                }
            }
            all.freeze()
        }
    };
    Collect::Whole(data)
}

pin_project_lite::pin_project! {
    /// A body sent as it came after some of its frames were read: those frames, its error if
    /// reading gave one, then the rest of it.
    pub(crate) struct Prefixed<B: Body> {
        frames: VecDeque<Frame<Bytes>>,
        error: Option<B::Error>,
        #[pin]
        rest: Option<B>,
    }
}

impl<B: Body<Data = Bytes>> Body for Prefixed<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        if let Some(f) = this.frames.pop_front() {
            return Poll::Ready(Some(Ok(f)));
        }
        if let Some(e) = this.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        match this.rest.as_pin_mut() {
            Some(rest) => rest.poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
            && self.error.is_none()
            && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let buffered: u64 = self
            .frames
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let rest = self
            .rest
            .as_ref()
            .map_or(SizeHint::with_exact(0), Body::size_hint);
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(buffered));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(buffered));
        }
        hint
    }
}

/// Implements [`ReplayBody`] for a boxed body type through [`collect_ready`]: `$wrap` makes
/// the type from any body with `Data = Bytes` and this type's error.
macro_rules! collected_body {
    ($(#[$doc:meta])* $ty:ty, [$($bound:tt)*], $err:ty, |$b:ident| $wrap:expr) => {
        $(#[$doc])*
        impl<$($bound)*> ReplayBody for $ty {
            type Saved = Collected;

            fn prepare(self, limit: usize) -> (Self, Option<Collected>) {
                match collect_ready(self, limit) {
                    Collect::Whole(data) => {
                        let $b = Full::new(data.clone()).map_err(|never: Infallible| -> $err {
                            match never {}
                        });
                        ($wrap, Some(Collected { data }))
                    }
                    Collect::Partial(p) => {
                        let $b = p;
                        ($wrap, None)
                    }
                }
            }

            fn replay(saved: &Collected) -> Self {
                let $b = Full::new(saved.data.clone()).map_err(|never: Infallible| -> $err {
                    match never {}
                });
                $wrap
            }
        }
    };
}

collected_body!(BoxBody<Bytes, E>, [E: Send + Sync + 'static], E, |b| BoxBody::new(b));
collected_body!(UnsyncBoxBody<Bytes, E>, [E: Send + 'static], E, |b| UnsyncBoxBody::new(b));
#[cfg(feature = "tonic")]
collected_body!(
    /// tonic's request body: a unary call's message is ready at once, so it is collected
    /// (up to the limit) and replayable; a client-streaming call's messages are sent as they
    /// come and never replayed.
    tonic::body::Body,
    [],
    tonic::Status,
    |b| tonic::body::Body::new(b)
);

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;

    fn boxed<B>(b: B) -> UnsyncBoxBody<Bytes, std::io::Error>
    where
        B: Body<Data = Bytes, Error = std::io::Error> + Send + 'static,
    {
        UnsyncBoxBody::new(b)
    }

    async fn bytes_of<B: Body<Data = Bytes>>(b: B) -> Vec<u8>
    where
        B::Error: std::fmt::Debug,
    {
        b.collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn frames_ready_within_the_limit_are_collected() {
        let frames = vec![
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::from_static(b"cd"))),
        ];
        let body = boxed(StreamBody::new(futures_util::stream::iter(frames)));
        let (sent, saved) = body.prepare(4);
        let saved = saved.expect("replayable");
        assert_eq!(saved.data().as_ref(), b"abcd");
        assert_eq!(bytes_of(sent).await, b"abcd");
        let again = UnsyncBoxBody::<Bytes, std::io::Error>::replay(&saved);
        assert_eq!(bytes_of(again).await, b"abcd");
    }

    #[tokio::test]
    async fn over_the_limit_or_pending_is_sent_as_it_came() {
        let frames = vec![
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::from_static(b"cde"))),
            Ok(Frame::data(Bytes::from_static(b"f"))),
        ];
        let body = boxed(StreamBody::new(futures_util::stream::iter(frames)));
        let (sent, saved) = body.prepare(4);
        assert!(saved.is_none());
        assert_eq!(bytes_of(sent).await, b"abcdef");

        // A stream whose next frame is not ready: sent once, whole.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
        tx.send(Ok(Frame::data(Bytes::from_static(b"x"))))
            .await
            .unwrap();
        let stream =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|f| (f, rx)) },
            );
        let (sent, saved) = boxed(StreamBody::new(stream)).prepare(1024);
        assert!(saved.is_none());
        tx.send(Ok(Frame::data(Bytes::from_static(b"y"))))
            .await
            .unwrap();
        drop(tx);
        assert_eq!(bytes_of(sent).await, b"xy");
    }

    #[tokio::test]
    async fn an_error_is_kept_in_its_place() {
        let frames = vec![
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Err(std::io::Error::other("broken")),
        ];
        let (sent, saved) = boxed(StreamBody::new(futures_util::stream::iter(frames))).prepare(64);
        assert!(saved.is_none());
        let mut sent = std::pin::pin!(sent);
        let first = sent.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap().as_ref(), b"ab");
        let second = sent.frame().await.unwrap();
        assert_eq!(second.unwrap_err().to_string(), "broken");
    }

    #[test]
    fn full_and_empty_are_kept_whole() {
        let (_, saved) = Full::new(Bytes::from_static(b"hello")).prepare(5);
        assert!(saved.is_some());
        let (_, saved) = Full::new(Bytes::from_static(b"hello")).prepare(4);
        assert!(saved.is_none());
        let (_, saved) = Empty::<Bytes>::new().prepare(0);
        assert!(saved.is_some());
        let (_, saved) = String::from("abc").prepare(2);
        assert!(saved.is_none());
    }
}
