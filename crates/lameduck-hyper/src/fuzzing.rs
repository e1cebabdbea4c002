//! Access to the crate's private parsers and watchers for the cargo-fuzz targets in `fuzz/`.
//!
//! cargo-fuzz builds with `--cfg fuzzing`, the only build this module is part of: it is no
//! part of the API. Each item here wraps the crate's own, adding nothing.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor};

use crate::connection::{h2_io, h2_streams, head_watch, preface};
use crate::request::layer::AdmissionLayer;
use crate::runtime::Runtime;

/// The payload of the PING h2 sends with its first GOAWAY.
pub const H2_SHUTDOWN_PING_PAYLOAD: [u8; 8] = h2_io::H2_SHUTDOWN_PING_PAYLOAD;

/// How stale the header-read watch's clock may be while the connection is active.
pub const TICK: Duration = head_watch::TICK;

/// The filter of the client's HTTP/2 bytes (`IgnoredStreamFilter`).
#[derive(Debug, Clone, Default)]
pub struct IgnoredStreamFilter(h2_io::IgnoredStreamFilter);

impl IgnoredStreamFilter {
    /// Filters `bytes` in place: `(kept, unread)`, the first `kept` bytes pass on, the bytes
    /// from `unread` on go in front of the next ones.
    pub fn filter(&mut self, bytes: &mut [u8]) -> (usize, usize) {
        let filtered = self.0.filter(bytes);
        (filtered.kept, filtered.unread)
    }
}

/// What an HTTP/2 connection's task and I/O share (`Http2Watch`).
#[derive(Debug, Clone, Default)]
pub struct Http2Watch(Arc<h2_streams::Http2Watch>);

impl Http2Watch {
    /// Asks the I/O to acknowledge h2's shutdown PING in the client's stead.
    pub fn force_ack(&self) {
        self.0.force_ack();
    }

    /// Whether h2 has read an acknowledgement of its shutdown PING.
    pub fn ack_read(&self) -> bool {
        self.0.ack_read()
    }
}

/// An HTTP/2 connection's I/O (`Http2Io`): reads go through the filter.
pub struct Http2Io<I>(h2_io::Http2Io<I>);

impl<I> Http2Io<I> {
    /// `inner`, from the start of the client's bytes; `watch` is the task's side.
    pub fn new(inner: I, watch: &Http2Watch) -> Self {
        Http2Io(h2_io::Http2Io::new(inner, Arc::clone(&watch.0)))
    }
}

impl<I: Read + Unpin> Read for Http2Io<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

/// The protocol the first bytes tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.
    Http1,
    /// HTTP/2 with prior knowledge.
    Http2,
}

/// A connection's I/O before the protocol is known (`ConnIo`).
pub struct ConnIo<I>(preface::ConnIo<I>);

impl<I: Read + Unpin> ConnIo<I> {
    /// `inner`, nothing read yet.
    pub fn new(inner: I) -> Self {
        ConnIo(preface::ConnIo::new(inner))
    }

    /// Reads the first bytes until the protocol is known.
    pub fn poll_protocol(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Protocol>> {
        self.0.poll_protocol(cx).map_ok(|protocol| match protocol {
            preface::Protocol::Http1 => Protocol::Http1,
            preface::Protocol::Http2 => Protocol::Http2,
        })
    }
}

impl<I: Read + Unpin> Read for ConnIo<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

/// What a connection's service, requests and task share (`ConnActivity`).
pub struct ConnActivity<R: Runtime>(Arc<head_watch::ConnActivity<R>>);

impl<R: Runtime> ConnActivity<R> {
    /// The activity of a new connection.
    pub fn new(admission: AdmissionLayer<R>) -> Self {
        ConnActivity(Arc::new(head_watch::ConnActivity::new(admission)))
    }

    /// A request head came: the returned guard is held until its response has ended.
    pub fn head_received(&self) -> InFlight<R> {
        InFlight(self.0.head_received())
    }

    /// The connection speaks HTTP/2.
    pub fn set_http2(&self) {
        self.0.set_http2();
    }

    /// Whether every request head received has had its response end.
    pub fn is_idle(&self) -> bool {
        self.0.is_idle()
    }
}

/// A request in flight (`InFlight`): dropping it ends its response.
pub struct InFlight<R: Runtime>(#[allow(dead_code)] head_watch::InFlight<R>);

/// The header-read watch of one connection (`HeadWatch`).
pub struct HeadWatch<R: Runtime>(head_watch::HeadWatch<R>);

impl<R: Runtime> HeadWatch<R> {
    /// The watch over `activity`, closing after `timeout`.
    pub fn new(activity: &ConnActivity<R>, runtime: R, timeout: Duration) -> Self {
        HeadWatch(head_watch::HeadWatch::new(
            Arc::clone(&activity.0),
            runtime,
            timeout,
        ))
    }

    /// Call after the connection returned `Pending`: `true` once it is to be closed.
    pub fn after_pending(&mut self, cx: &mut Context<'_>) -> bool {
        self.0.after_pending(cx)
    }
}
