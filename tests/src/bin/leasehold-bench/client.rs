//! One keep-alive HTTP/1.1 connection on hyper's client connection API
//! directly (no pool, no reqwest: the generator must stay cheaper than the
//! server it loads).

use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

pub struct Conn {
    pub addr: SocketAddr,
    sender: http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { addr, sender })
    }

    /// Reconnect (uncounted) if the server closed this connection while idle.
    pub async fn ensure_ready(&mut self) -> anyhow::Result<()> {
        if self.sender.ready().await.is_err() {
            *self = Conn::connect(self.addr).await?;
        }
        Ok(())
    }

    pub async fn send(
        &mut self,
        host: &str,
        method: Method,
        path: &str,
        auth: Option<&str>,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.sender.ready().await?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, host);
        if let Some(auth) = auth {
            req = req.header(AUTHORIZATION, auth);
        }
        let req = match body {
            Some(b) => req
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(b))?,
            None => req.body(Full::new(Bytes::new()))?,
        };
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// `"seat_id":"..."` out of a lease body, without a JSON parse.
pub fn seat_id(body: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"seat_id\":\"";
    let start = body.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = body[start..].iter().position(|&b| b == b'"')?;
    String::from_utf8(body[start..start + len].to_vec()).ok()
}
