//! One attempt: a signed `POST` of a delivery's stored body to its
//! webhook's URL. No redirects are followed, an attempt ends after
//! [`TIMEOUT`], and at most [`MAX_RESPONSE`] bytes of the answer are read.
//! Any 2xx is success; the error text of anything else names the status
//! or the transport's failure, never the secret nor the URL.

use std::time::Duration;

use leasehold_common::text::is_unsafe_char;
use reqwest::header::{CONTENT_TYPE, HeaderValue};

use super::sign::{SIGNATURE_HEADER, signature};

/// No answer within this is a failed attempt (`timeout`).
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a receiver's answer that is read (for the error text).
pub const MAX_RESPONSE: usize = 1024;
/// The most of an answer's body quoted in an error.
const QUOTED: usize = 200;
/// The `Leasehold-Delivery` header: the delivery's id, the same on every
/// retry (receivers de-duplicate on it).
pub const DELIVERY_HEADER: &str = "Leasehold-Delivery";

/// Where one delivery goes: the webhook's URL and secret as the licenses
/// file says now.
#[derive(Clone)]
pub struct Target {
    pub url: String,
    pub secret: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// The HTTP client of a replica's deliveries.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
}

impl Sender {
    pub fn new() -> Result<Sender, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .user_agent(concat!("leasehold/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| describe(&e))?;
        Ok(Sender { client })
    }

    /// POST `body` to `target`, signed at `t` (unix seconds).
    pub async fn send(&self, target: &Target, id: &str, body: &str, t: i64) -> Result<(), String> {
        let sig = signature(&target.secret, t, body.as_bytes());
        let request = self
            .client
            .post(&target.url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(DELIVERY_HEADER, id)
            .header(SIGNATURE_HEADER, sig)
            .body(body.to_string());
        let result = async {
            let mut resp = request.send().await?;
            let status = resp.status();
            let answer = read_capped(&mut resp).await?;
            Ok::<_, reqwest::Error>((status, answer))
        }
        .await;
        let outcome = match result {
            Ok((status, _)) if status.is_success() => Ok(()),
            Ok((status, answer)) => Err(status_error(status, &answer)),
            Err(e) => Err(describe(&e)),
        };
        outcome.map_err(|text| redact(text, target))
    }
}

/// At most [`MAX_RESPONSE`] bytes of the answer; the rest is never read
/// (the connection is dropped with it).
async fn read_capped(resp: &mut reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut answer = Vec::new();
    while answer.len() < MAX_RESPONSE {
        match resp.chunk().await? {
            Some(chunk) => {
                let room = MAX_RESPONSE - answer.len();
                answer.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            None => break,
        }
    }
    Ok(answer)
}

/// `HTTP 500 Internal Server Error: <the answer's start>`.
fn status_error(status: reqwest::StatusCode, answer: &[u8]) -> String {
    let mut text = format!("HTTP {}", status.as_u16());
    if let Some(reason) = status.canonical_reason() {
        text.push(' ');
        text.push_str(reason);
    }
    if status.is_redirection() {
        text.push_str(" (redirects are not followed)");
    }
    let quoted = printable(&String::from_utf8_lossy(answer), QUOTED);
    if !quoted.is_empty() {
        text.push_str(": ");
        text.push_str(&quoted);
    }
    text
}

/// A transport failure in a few words: `timeout`, or the error and its
/// causes (without the URL reqwest would add).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timeout".to_string();
    }
    let mut parts = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = source {
        let text = match err.downcast_ref::<reqwest::Error>() {
            Some(r) => reqwest_words(r),
            None => err.to_string(),
        };
        if !text.is_empty() && !parts.iter().any(|p: &String| p.contains(&text)) {
            parts.push(text);
        }
        source = err.source();
    }
    printable(&parts.join(": "), 300)
}

/// A reqwest error's own sentence, never its URL.
fn reqwest_words(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "cannot connect"
    } else if e.is_request() {
        "request failed"
    } else if e.is_body() || e.is_decode() {
        "reading the answer failed"
    } else if e.is_builder() {
        "cannot build the request"
    } else {
        "HTTP error"
    };
    kind.to_string()
}

/// Whatever an error says, never the secret or the URL (a Slack-style URL
/// is a credential of its own).
fn redact(text: String, target: &Target) -> String {
    let mut text = text;
    if !target.secret.is_empty() && text.contains(&target.secret) {
        text = text.replace(&target.secret, "<redacted>");
    }
    if text.contains(&target.url) {
        text = text.replace(&target.url, "<url>");
    }
    text
}

/// `s` with control and format characters as spaces, trimmed, cut to
/// `max` characters (it is shown in terminals and the dashboard).
fn printable(s: &str, max: usize) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| if is_unsafe_char(c) { ' ' } else { c })
        .collect();
    let trimmed = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if trimmed.chars().count() <= max {
        return trimmed;
    }
    let mut cut: String = trimmed.chars().take(max).collect();
    cut.push('…');
    cut
}
