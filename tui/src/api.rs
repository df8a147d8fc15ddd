//! The admin HTTP API, as the console and the one-shot commands see it.
//!
//! [`AdminClient`] wraps the admin endpoints of the contract
//! (`GET /v1/admin/licenses`, `GET /v1/admin/seats`, `GET /v1/admin/events`,
//! `DELETE /v1/admin/seats/{id}`, `GET /v1/admin/usage`,
//! `GET /v1/admin/sessions` as JSON pages or streamed CSV, and in
//! `rightsizing` `GET /v1/admin/usage/what-if`; in `webhooks` the webhook
//! and alert endpoints; in `entitlements` `GET /v1/admin/entitlements`) and
//! turns every failure into an [`ApiError`] whose `Display` is the one line
//! a person reads on stderr or in the status bar. [`SseParser`] is a pure,
//! incremental parser of the Server-Sent Events wire format for
//! `GET /v1/admin/events/stream`; [`AdminClient::event_stream`] opens the
//! stream (sending `Last-Event-ID` to resume) and feeds it.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use leasehold_common::Timestamp;
use leasehold_common::api::{
    ErrorBody, Event, EventsResponse, LicensesResponse, RevokeRequest, SeatsPage, SeatsResponse,
    SessionsResponse, UsageResponse, code,
};
use leasehold_common::text::sanitize_for_terminal;
use reqwest::{Method, RequestBuilder, StatusCode};

mod entitlements;
mod rightsizing;
mod webhooks;
pub use rightsizing::WhatIfQuery;
pub use webhooks::DeliveriesQuery;

/// How long a plain admin request may take before it counts as a failure.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What went wrong talking to the server. `Display` is a complete sentence
/// for a human; every server-supplied part is sanitized for the terminal.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("cannot reach the server at {server}: {cause}")]
    Unreachable { server: String, cause: String },
    #[error(
        "the server at {server} refused the admin token (401 unauthorized); \
         check --token, LEASEHOLD_ADMIN_TOKEN or admin.token in --data-dir"
    )]
    Unauthorized { server: String },
    #[error(
        "no seat {seat_id} on the server (unknown_seat): it was already released, reaped or revoked"
    )]
    UnknownSeat { seat_id: String },
    /// 409 `borrowed`: an unforced revoke of a borrowed seat. `message` is
    /// the server's sentence (until when, and why force is needed).
    #[error("{message} (409 borrowed)")]
    Borrowed { message: String },
    #[error("the server answered {status} {code}: {message}")]
    Server {
        status: u16,
        code: String,
        message: String,
    },
    #[error("unexpected answer from the server at {server}: {detail}")]
    Protocol { server: String, detail: String },
}

/// The innermost cause of a reqwest error ("Connection refused (os error
/// 111)"), which says more than reqwest's own "error sending request".
fn root_cause(err: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    if err.is_timeout() && !text.contains("timed out") {
        format!("timed out ({text})")
    } else {
        text
    }
}

/// A client of the admin endpoints of one server.
#[derive(Debug, Clone)]
pub struct AdminClient {
    base: String,
    token: String,
    http: reqwest::Client,
    /// For the SSE stream: no overall timeout (it is meant to stay open).
    stream_http: reqwest::Client,
}

impl AdminClient {
    /// `base` is the server's root URL, e.g. `http://127.0.0.1:7400`.
    pub fn new(base: &str, token: &str) -> anyhow::Result<Self> {
        let base = base.trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()?;
        let stream_http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(AdminClient {
            base,
            token: token.to_string(),
            http,
            stream_http,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(&self.token)
    }

    fn unreachable(&self, err: &reqwest::Error) -> ApiError {
        ApiError::Unreachable {
            server: self.base.clone(),
            cause: root_cause(err),
        }
    }

    /// Send, and map transport failures and 401 to [`ApiError`].
    async fn send(&self, req: RequestBuilder) -> Result<reqwest::Response, ApiError> {
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            return Err(ApiError::Unauthorized {
                server: self.base.clone(),
            });
        }
        Ok(resp)
    }

    /// Turn a non-success response into [`ApiError::Server`], reading the
    /// contract's `{"error", "message"}` body when there is one.
    async fn error_from(&self, resp: reqwest::Response) -> ApiError {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        match serde_json::from_str::<ErrorBody>(&body) {
            Ok(e) => ApiError::Server {
                status: status.as_u16(),
                code: sanitize_for_terminal(&e.error).into_owned(),
                message: sanitize_for_terminal(&e.message).into_owned(),
            },
            Err(_) => ApiError::Server {
                status: status.as_u16(),
                code: status
                    .canonical_reason()
                    .unwrap_or("error")
                    .to_lowercase()
                    .replace(' ', "_"),
                message: sanitize_for_terminal(body.trim())
                    .chars()
                    .take(200)
                    .collect(),
            },
        }
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let resp = self.send(self.request(Method::GET, path)).await?;
        if !resp.status().is_success() {
            return Err(self.error_from(resp).await);
        }
        let bytes = resp.bytes().await.map_err(|e| self.unreachable(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Protocol {
            server: self.base.clone(),
            detail: format!("{path}: {e}"),
        })
    }

    /// `GET /v1/admin/licenses`: the pools and the server's `now`.
    pub async fn licenses(&self) -> Result<LicensesResponse, ApiError> {
        self.get_json("/v1/admin/licenses").await
    }

    /// `GET /v1/admin/seats[?license=ID]`: every seat not yet reaped.
    pub async fn seats(&self, license: Option<&str>) -> Result<SeatsResponse, ApiError> {
        match license {
            Some(id) => {
                self.get_json(&format!("/v1/admin/seats?license={}", encode_query(id)))
                    .await
            }
            None => self.get_json("/v1/admin/seats").await,
        }
    }

    /// `GET /v1/admin/seats?q=&sort=&order=&limit=&after=`: one page,
    /// filtered, sorted and keyset-paged by the server.
    pub async fn seats_page(&self, q: &SeatsPageQuery<'_>) -> Result<SeatsPage, ApiError> {
        let mut path = format!(
            "/v1/admin/seats?sort={}&order={}&limit={}",
            q.sort,
            if q.desc { "desc" } else { "asc" },
            q.limit
        );
        if !q.q.is_empty() {
            path.push_str(&format!("&q={}", encode_query(q.q)));
        }
        if let Some(after) = q.after {
            path.push_str(&format!("&after={}", encode_query(after)));
        }
        self.get_json(&path).await
    }

    /// `GET /v1/admin/events?after=ID&limit=N`, ascending ids.
    pub async fn events(&self, after: i64, limit: u32) -> Result<EventsResponse, ApiError> {
        self.get_json(&format!("/v1/admin/events?after={after}&limit={limit}"))
            .await
    }

    /// `DELETE /v1/admin/seats/{seat_id}`. A 404 `unknown_seat` is
    /// [`ApiError::UnknownSeat`]: the seat vanished (released, reaped,
    /// revoked); a 409 `borrowed` is [`ApiError::Borrowed`]: it is borrowed
    /// and `body.force` was not set.
    pub async fn revoke(&self, seat_id: &str, body: &RevokeRequest) -> Result<(), ApiError> {
        let mut req = self.request(
            Method::DELETE,
            &format!("/v1/admin/seats/{}", encode_path(seat_id)),
        );
        if body.reason.is_some() || body.block_s.is_some() || body.force {
            req = req.json(body);
        }
        let resp = self.send(req).await?;
        if resp.status().is_success() {
            return Ok(());
        }
        match self.error_from(resp).await {
            ApiError::Server {
                status: 404, code, ..
            } if code == code::UNKNOWN_SEAT => Err(ApiError::UnknownSeat {
                seat_id: sanitize_for_terminal(seat_id).into_owned(),
            }),
            ApiError::Server {
                status: 409,
                code,
                message,
            } if code == code::BORROWED => Err(ApiError::Borrowed { message }),
            other => Err(other),
        }
    }

    /// `GET /v1/admin/usage`: one license's use over a range, in buckets.
    pub async fn usage(&self, q: &UsageQuery<'_>) -> Result<UsageResponse, ApiError> {
        self.get_json(&format!("/v1/admin/usage?{}", q.to_query()))
            .await
    }

    /// `GET /v1/admin/sessions` as JSON: one page, newest first; pass its
    /// `next` as [`SessionsQuery::after`] for the following one.
    pub async fn sessions_page(&self, q: &SessionsQuery<'_>) -> Result<SessionsResponse, ApiError> {
        self.get_json(&format!("/v1/admin/sessions?{}", q.to_query()))
            .await
    }

    /// `GET /v1/admin/sessions` with `Accept: text/csv`: every session of
    /// the range (no paging; `limit` and `after` are not sent), as the bytes
    /// arrive. It uses the client without an overall timeout, since a long
    /// range may take longer than [`REQUEST_TIMEOUT`] to stream; the caller
    /// bounds the wait for each chunk instead.
    pub async fn sessions_csv(
        &self,
        q: &SessionsQuery<'_>,
    ) -> Result<impl Stream<Item = Result<impl AsRef<[u8]> + use<>, ApiError>> + use<>, ApiError>
    {
        let whole = SessionsQuery {
            limit: None,
            after: None,
            ..q.clone()
        };
        let req = self
            .stream_http
            .get(format!(
                "{}/v1/admin/sessions?{}",
                self.base,
                whole.to_query()
            ))
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, "text/csv");
        let resp = self.send(req).await?;
        if !resp.status().is_success() {
            return Err(self.error_from(resp).await);
        }
        let base = self.base.clone();
        Ok(resp.bytes_stream().map(move |chunk| {
            chunk.map_err(|e| ApiError::Unreachable {
                server: base.clone(),
                cause: root_cause(&e),
            })
        }))
    }

    /// Open `GET /v1/admin/events/stream`, resuming after `last_event_id`.
    /// The returned stream yields each event as it arrives and ends (with an
    /// error item or simply) when the connection does; reconnecting and
    /// resuming is the caller's job (the `stream` module, a layer above).
    pub async fn event_stream(
        &self,
        last_event_id: Option<i64>,
    ) -> Result<impl Stream<Item = Result<Event, ApiError>> + use<>, ApiError> {
        let mut req = self
            .stream_http
            .get(format!("{}/v1/admin/events/stream", self.base))
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = self.send(req).await?;
        if !resp.status().is_success() {
            return Err(self.error_from(resp).await);
        }
        let base = self.base.clone();
        let mut parser = SseParser::default();
        let stream = resp.bytes_stream().flat_map(move |chunk| {
            let items: Vec<Result<Event, ApiError>> = match chunk {
                Ok(bytes) => parser
                    .feed(&bytes)
                    .into_iter()
                    .filter_map(|msg| decode_event(&msg, &base))
                    .collect(),
                Err(e) => vec![Err(ApiError::Unreachable {
                    server: base.clone(),
                    cause: root_cause(&e),
                })],
            };
            futures_util::stream::iter(items)
        });
        Ok(stream)
    }
}

/// The parameters of `GET /v1/admin/usage`. Absent ones are left to the
/// server (the last 24 h; a step giving at most 500 points).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery<'a> {
    pub license: &'a str,
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
    /// Sent in whole seconds (`3600s`), rounded up: the server's step
    /// syntax is `60s`, `1h`, and a step never comes out shorter than asked.
    pub step: Option<Duration>,
}

impl UsageQuery<'_> {
    /// The query string, without the `?`.
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.push("license", self.license);
        q.push_time("from", self.from);
        q.push_time("to", self.to);
        if let Some(step) = self.step {
            q.push(
                "step",
                &format!("{}s", step.as_millis().div_ceil(1000).max(1)),
            );
        }
        q.0
    }
}

/// The parameters of `GET /v1/admin/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionsQuery<'a> {
    pub license: Option<&'a str>,
    pub holder: Option<&'a str>,
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
    /// Page size (JSON only; the server's default is 100, its maximum
    /// [`SESSIONS_PAGE_MAX`]).
    pub limit: Option<u32>,
    /// The `next` cursor of the previous page.
    pub after: Option<&'a str>,
}

/// The largest `limit` the sessions endpoint accepts.
pub const SESSIONS_PAGE_MAX: u32 = 10_000;

impl SessionsQuery<'_> {
    /// The query string, without the `?`.
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        if let Some(l) = self.license {
            q.push("license", l);
        }
        if let Some(h) = self.holder {
            q.push("holder", h);
        }
        q.push_time("from", self.from);
        q.push_time("to", self.to);
        if let Some(n) = self.limit {
            q.push("limit", &n.to_string());
        }
        if let Some(a) = self.after {
            q.push("after", a);
        }
        q.0
    }
}

/// A query string under construction, every value percent-encoded.
#[derive(Default)]
struct Query(String);

impl Query {
    fn push(&mut self, name: &str, value: &str) {
        if !self.0.is_empty() {
            self.0.push('&');
        }
        self.0.push_str(name);
        self.0.push('=');
        self.0.push_str(&encode_query(value));
    }

    fn push_time(&mut self, name: &str, t: Option<Timestamp>) {
        if let Some(t) = t {
            self.push(name, &t.to_rfc3339());
        }
    }
}

/// One SSE message: the `data:` event JSON, and its id (from `id:`, if any).
fn decode_event(msg: &SseMessage, base: &str) -> Option<Result<Event, ApiError>> {
    // Ignore named events that are not ours (e.g. a server "ping") and
    // messages without data (a bare id or retry line).
    if msg.data.is_empty()
        || !(msg.event.is_empty() || msg.event == "message" || msg.event == "event")
    {
        return None;
    }
    Some(
        serde_json::from_str::<Event>(&msg.data).map_err(|e| ApiError::Protocol {
            server: base.to_string(),
            detail: format!("event stream: {e}"),
        }),
    )
}

/// Percent-encode a value for a query string (RFC 3986 unreserved kept).
pub fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One request for a page of seats ([`AdminClient::seats_page`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatsPageQuery<'a> {
    /// Substring of holder, fingerprint, license id or seat id; empty:
    /// every seat.
    pub q: &'a str,
    /// `license`, `holder`, `expires_at` or `checked_out_at`.
    pub sort: &'a str,
    pub desc: bool,
    pub limit: usize,
    /// The `next` of the page before, in the same sort and order.
    pub after: Option<&'a str>,
}

/// Percent-encode one path segment.
pub fn encode_path(s: &str) -> String {
    encode_query(s)
}

/// One dispatched Server-Sent Events message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseMessage {
    /// The `id:` in force when the message was dispatched ("" if none yet).
    pub id: String,
    /// The `event:` field ("" means the default type, `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// An incremental parser of the SSE wire format (WHATWG HTML, "Server-sent
/// events"): feed it bytes as they arrive, in any chunking, and it returns the
/// messages completed so far. Handles `\n`, `\r\n` and `\r` line ends,
/// comments (`:` keep-alives), multi-line `data:` and the optional space
/// after the colon.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an unfinished line (kept as bytes: a chunk may split a
    /// multi-byte UTF-8 character).
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to it.
    after_cr: bool,
    last_id: String,
    event: String,
    data: Vec<String>,
    has_data: bool,
}

impl SseParser {
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseMessage> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    let line = String::from_utf8_lossy(&line).into_owned();
                    if let Some(msg) = self.process_line(&line) {
                        out.push(msg);
                    }
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    fn process_line(&mut self, line: &str) -> Option<SseMessage> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push(value.to_string());
                self.has_data = true;
            }
            "event" => self.event = value.to_string(),
            // An id containing NUL is ignored, per the spec.
            "id" if !value.contains('\0') => self.last_id = value.to_string(),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseMessage> {
        let event = std::mem::take(&mut self.event);
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        let data = std::mem::take(&mut self.data).join("\n");
        Some(SseMessage {
            id: self.last_id.clone(),
            event,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_parses_messages_in_any_chunking() {
        let wire = b": keep-alive\n\nid: 7\ndata: {\"a\":1}\n\nid:8\r\ndata:x\r\ndata: y\r\n\r\n";
        let whole = SseParser::default().feed(wire);
        assert_eq!(
            whole,
            vec![
                SseMessage {
                    id: "7".into(),
                    event: String::new(),
                    data: "{\"a\":1}".into()
                },
                SseMessage {
                    id: "8".into(),
                    event: String::new(),
                    data: "x\ny".into()
                },
            ]
        );
        // Byte by byte gives the same messages.
        let mut p = SseParser::default();
        let mut bytewise = Vec::new();
        for b in wire.iter() {
            bytewise.extend(p.feed(std::slice::from_ref(b)));
        }
        assert_eq!(bytewise, whole);
    }

    #[test]
    fn sse_handles_cr_line_ends_and_split_utf8() {
        let mut p = SseParser::default();
        let text = "data: Zoë\r\r".as_bytes();
        let (a, b) = text.split_at(8); // splits the two bytes of 'ë'
        assert!(p.feed(a).is_empty());
        let msgs = p.feed(b);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].data, "Zoë");
    }

    #[test]
    fn sse_ignores_messages_without_data_and_keeps_last_id() {
        let mut p = SseParser::default();
        assert!(p.feed(b"id: 3\n\nretry: 100\n\n").is_empty());
        let msgs = p.feed(b"event: ping\ndata: {}\n\ndata: z\n\n");
        assert_eq!(msgs[0].event, "ping");
        assert_eq!(msgs[1].id, "3");
        assert_eq!(msgs[1].event, "");
    }

    #[test]
    fn decodes_event_json_and_skips_foreign_event_types() {
        let data = r#"{"id":5,"at":"2026-11-30T04:00:00.000Z","kind":"reap","license_id":"demo","seat_id":"ab","holder":"h","detail":null}"#;
        let msg = SseMessage {
            id: "5".into(),
            event: String::new(),
            data: data.into(),
        };
        let ev = decode_event(&msg, "http://x").unwrap().unwrap();
        assert_eq!(ev.id, 5);
        let ping = SseMessage {
            event: "ping".into(),
            ..msg.clone()
        };
        assert!(decode_event(&ping, "http://x").is_none());
        let bad = SseMessage {
            data: "nope".into(),
            ..msg
        };
        assert!(decode_event(&bad, "http://x").unwrap().is_err());
    }

    #[test]
    fn usage_and_sessions_queries() {
        let t = Timestamp::from_millis(1_796_011_200_000);
        let q = UsageQuery {
            license: "demo cad",
            from: Some(t),
            to: None,
            step: Some(Duration::from_millis(1500)),
        };
        assert_eq!(
            q.to_query(),
            "license=demo%20cad&from=2026-11-30T04%3A00%3A00.000Z&step=2s"
        );
        let q = UsageQuery {
            license: "x",
            from: None,
            to: Some(t),
            step: Some(Duration::from_secs(3600)),
        };
        assert_eq!(
            q.to_query(),
            "license=x&to=2026-11-30T04%3A00%3A00.000Z&step=3600s"
        );
        assert_eq!(SessionsQuery::default().to_query(), "");
        let q = SessionsQuery {
            license: Some("x"),
            holder: Some("a&b"),
            limit: Some(SESSIONS_PAGE_MAX),
            after: Some("c/1"),
            ..SessionsQuery::default()
        };
        assert_eq!(
            q.to_query(),
            "license=x&holder=a%26b&limit=10000&after=c%2F1"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode_query("demo-cad"), "demo-cad");
        assert_eq!(encode_query("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
