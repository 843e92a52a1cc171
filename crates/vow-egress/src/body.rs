//! The request body of an egress POST, which records when the HTTP connection has taken all of
//! it. That moment is what [`crate::EgressError::Timeout`]'s `sent` reports.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// A one-chunk body with an exact length (so hyper sends `Content-Length`, never chunked) that
/// sets its [`SentFlag`] when hyper takes the chunk to write it on the connection: hyper encodes
/// it into its write buffer in the same step and flushes it right after.
///
/// hyper never polls an empty body with a known length of 0, so for an empty body the flag
/// stays `false`.
#[derive(Debug)]
pub(crate) struct TrackedBody {
    data: Option<Bytes>,
    taken: bool,
    sent: Arc<AtomicBool>,
}

impl TrackedBody {
    pub(crate) fn new(data: Bytes) -> (Self, SentFlag) {
        let sent = Arc::new(AtomicBool::new(false));
        let data = (!data.is_empty()).then_some(data);
        let body = Self {
            data,
            taken: false,
            sent: sent.clone(),
        };
        (body, SentFlag(sent))
    }
}

/// Reads whether the [`TrackedBody`] it came with was fully handed to the connection.
#[derive(Debug, Clone)]
pub(crate) struct SentFlag(Arc<AtomicBool>);

impl SentFlag {
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.data.take() {
            Some(data) => {
                this.taken = true;
                this.sent.store(true, Ordering::Release);
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            None => Poll::Ready(None),
        }
    }

    /// `false` until the chunk is taken, even for an empty body: hyper only sends
    /// `Content-Length: 0` for a body that does not claim to be over before it starts.
    fn is_end_stream(&self) -> bool {
        self.taken
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    #[tokio::test]
    async fn the_flag_is_set_when_the_chunk_is_taken() {
        let (mut body, sent) = TrackedBody::new(Bytes::from_static(b"abc"));
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(3));
        assert!(!http_body::Body::is_end_stream(&body));
        assert!(!sent.get());
        let frame = poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut body), cx)).await;
        assert_eq!(frame.unwrap().unwrap().into_data().unwrap(), "abc");
        assert!(sent.get());
        assert!(http_body::Body::is_end_stream(&body));
    }

    #[test]
    fn an_empty_body_has_a_known_length_of_zero() {
        let (body, sent) = TrackedBody::new(Bytes::new());
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(0));
        assert!(!http_body::Body::is_end_stream(&body));
        assert!(!sent.get());
    }
}
