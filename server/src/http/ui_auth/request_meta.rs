//! What the auth checks read from a request: method, headers and the
//! connection's peer, and what follows from them (HTTPS, the client's
//! address, the sign-in cookie).

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use warp::Filter;
use warp::http::{HeaderMap, Method};

use super::{COOKIE, HOST_COOKIE};
use crate::proxies::ProxyPolicy;

/// The header the dashboard's script sets on requests no person asked for.
pub const BACKGROUND_HEADER: &str = "x-leasehold-background";
use crate::http::peer::PeerAddr;

/// What the auth checks read from a request.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub method: Method,
    /// The request's path (without the query).
    pub path: String,
    pub headers: HeaderMap,
    pub peer: Option<SocketAddr>,
    /// Whose forwarding headers to believe, and the public origin.
    pub proxies: Arc<ProxyPolicy>,
}

/// The request's method, headers and peer (as the accept loop recorded it,
/// else as warp knows it), judged by `proxies`.
pub fn request_meta(
    proxies: Arc<ProxyPolicy>,
) -> impl Filter<Extract = (RequestMeta,), Error = Infallible> + Clone {
    warp::method()
        .and(warp::path::full())
        .and(warp::header::headers_cloned())
        .and(warp::ext::optional::<PeerAddr>())
        .and(warp::addr::remote())
        .map(
            move |method,
                  path: warp::path::FullPath,
                  headers,
                  peer: Option<PeerAddr>,
                  remote: Option<SocketAddr>| RequestMeta {
                method,
                path: path.as_str().to_string(),
                headers,
                peer: peer.map(|p| p.0).or(remote),
                proxies: proxies.clone(),
            },
        )
}

impl RequestMeta {
    /// A header's value, trimmed; one that is not text counts as absent.
    pub(in crate::http) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    }

    fn peer_is_trusted(&self) -> bool {
        self.peer.is_some_and(|p| self.proxies.trusts(p.ip()))
    }

    /// Did the request come over HTTPS? With `--public-url`, as it says;
    /// otherwise only a trusted proxy is believed about it.
    pub fn is_https(&self) -> bool {
        if let Some(public) = &self.proxies.public {
            return public.https;
        }
        self.peer_is_trusted()
            && self
                .header("x-forwarded-proto")
                .and_then(|v| v.split(',').next())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
    }

    /// The client's address: the peer, or, behind trusted proxies, the
    /// client they name in `X-Forwarded-For` (an untrusted peer's header is
    /// ignored, so rotating it escapes nothing).
    pub fn client_ip(&self) -> IpAddr {
        let peer = self
            .peer
            .map(|p| p.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        self.proxies
            .client_behind(peer, self.header("x-forwarded-for"))
    }

    /// The sign-in cookie's name: `__Host-` when the public URL is https.
    pub fn cookie_name(&self) -> &'static str {
        match &self.proxies.public {
            Some(p) if p.https => HOST_COOKIE,
            _ => COOKIE,
        }
    }

    /// The sign-in id the cookie holds, if one was sent.
    pub fn sign_in_cookie(&self) -> Option<&str> {
        let name = self.cookie_name();
        self.headers
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.split_once('='))
            .find(|(n, _)| n.trim() == name)
            .map(|(_, value)| value.trim())
    }

    /// Whether the request is one the dashboard makes by itself, not one a
    /// person asked for: its background refreshes say so with
    /// `X-Leasehold-Background` (any value), and the event stream is never a
    /// person's use (it stays open for hours). These do not keep a sign-in
    /// from going idle.
    pub fn is_background(&self) -> bool {
        self.headers.contains_key(BACKGROUND_HEADER) || self.path == "/v1/admin/events/stream"
    }

    /// GET and HEAD change nothing; everything else does.
    pub fn changes_state(&self) -> bool {
        !matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }

    /// This server's origin: `--public-url`, else as the client addressed it.
    pub(super) fn own_origin(&self) -> Option<String> {
        if let Some(public) = &self.proxies.public {
            return Some(public.origin.clone());
        }
        let host = self.header("host")?;
        let scheme = if self.is_https() { "https" } else { "http" };
        Some(format!("{scheme}://{host}"))
    }
}
