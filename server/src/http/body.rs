//! Reading a request body with the size limit ([`MAX_BODY`]), for the
//! routes that parse one themselves.

use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use warp::{Filter, Rejection};

use super::MAX_BODY;
use super::error::ApiError;

/// The raw body, at most [`MAX_BODY`] bytes, whether or not the client sent
/// a Content-Length (chunked bodies are counted as they arrive). Handlers
/// parse it, so an empty body can get its own message.
pub fn limited() -> impl Filter<Extract = (Bytes,), Error = Rejection> + Clone {
    warp::header::optional::<u64>("content-length")
        .and(warp::body::stream())
        .and_then(collect_limited)
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
