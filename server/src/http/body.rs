//! Reading a request body with the size limit ([`MAX_BODY`]) and the body
//! timeout ([`BodyDeadline`]), for the routes that parse one themselves.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use tokio::time::Instant;
use warp::{Filter, Rejection};

use super::MAX_BODY;
use super::error::ApiError;

/// The body timeout when the accept loop set none (in-process route tests).
const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// When the whole body must have arrived: recorded by the accept loop
/// ([`crate::serve`]) as each request's headers are read, so a client that
/// sends a body byte by byte cannot hold the connection longer than
/// `--body-timeout` (the header timeout does not cover bodies).
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline {
    pub at: Instant,
    /// The configured timeout, for the message.
    pub timeout: Duration,
}

impl BodyDeadline {
    pub fn from_now(timeout: Duration) -> Self {
        BodyDeadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }
}

/// The raw body, at most [`MAX_BODY`] bytes, whether or not the client sent
/// a Content-Length (chunked bodies are counted as they arrive), read before
/// the request's [`BodyDeadline`] (else `408`). Handlers parse it, so an
/// empty body can get its own message.
pub fn limited() -> impl Filter<Extract = (Bytes,), Error = Rejection> + Clone {
    warp::header::optional::<u64>("content-length")
        .and(warp::ext::optional::<BodyDeadline>())
        .and(warp::body::stream())
        .and_then(
            |length, deadline: Option<BodyDeadline>, stream| async move {
                let deadline =
                    deadline.unwrap_or_else(|| BodyDeadline::from_now(DEFAULT_BODY_TIMEOUT));
                tokio::time::timeout_at(deadline.at, collect_limited(length, stream))
                    .await
                    .unwrap_or_else(|_| {
                        Err(warp::reject::custom(ApiError::body_timeout(
                            deadline.timeout,
                        )))
                    })
            },
        )
}

async fn collect_limited<S, B>(length: Option<u64>, stream: S) -> Result<Bytes, Rejection>
where
    S: futures_util::Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    if length.is_some_and(|l| l > MAX_BODY as u64) {
        return Err(warp::reject::custom(ApiError::too_large(MAX_BODY)));
    }
    let mut stream = std::pin::pin!(stream);
    let mut body = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let mut chunk = chunk.map_err(|e| {
            warp::reject::custom(ApiError::invalid(format!("could not read the body: {e}")))
        })?;
        if body.len() + chunk.remaining() > MAX_BODY {
            return Err(warp::reject::custom(ApiError::too_large(MAX_BODY)));
        }
        while chunk.has_remaining() {
            let part = chunk.chunk();
            let n = part.len();
            body.extend_from_slice(part);
            chunk.advance(n);
        }
    }
    Ok(body.freeze())
}
