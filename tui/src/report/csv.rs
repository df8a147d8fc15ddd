//! `leasehold report --csv`: the sessions of the range, streamed from the
//! server's CSV endpoint to stdout, one license after another with the
//! header row once.
//!
//! The bytes pass through a [`CsvRelay`] that works on whole lines: it drops
//! the header of every license after the first and replaces characters a
//! terminal would act on (the server refuses them in holders and
//! fingerprints, so on good data this changes nothing). CR, LF and TAB stay:
//! they are CSV's own (RFC 4180 lines end in CRLF; quoted cells may hold them).

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use leasehold_common::text::is_unsafe_char;

use super::range::Range;
use crate::api::{AdminClient, SessionsQuery};

/// How long the server may stay silent in the middle of a CSV before the
/// command gives up (the CSV client has no overall timeout).
const CHUNK_IDLE: Duration = Duration::from_secs(30);

/// Whole lines out of arbitrary chunks, header dropped on request,
/// unsafe characters replaced.
#[derive(Debug)]
pub struct CsvRelay {
    skip_header: bool,
    /// An unfinished line (kept as bytes: a chunk may end inside a UTF-8
    /// character).
    pending: Vec<u8>,
}

impl CsvRelay {
    /// `skip_header`: this is not the first license's CSV.
    pub fn new(skip_header: bool) -> Self {
        CsvRelay {
            skip_header,
            pending: Vec::new(),
        }
    }

    /// Take a chunk; append every line it completes to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.pending.extend_from_slice(chunk);
        let Some(last_nl) = self.pending.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let rest = self.pending.split_off(last_nl + 1);
        let done = std::mem::replace(&mut self.pending, rest);
        for line in done.split_inclusive(|&b| b == b'\n') {
            self.emit(line, out);
        }
    }

    /// The stream ended: emit a last line that had no line end.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.pending);
        if !line.is_empty() {
            self.emit(&line, out);
        }
    }

    fn emit(&mut self, line: &[u8], out: &mut Vec<u8>) {
        if self.skip_header {
            self.skip_header = false;
            return;
        }
        let text = String::from_utf8_lossy(line);
        if !text.chars().any(is_unsafe_csv_char) {
            out.extend_from_slice(text.as_bytes());
            return;
        }
        let safe: String = text
            .chars()
            .map(|c| if is_unsafe_csv_char(c) { '\u{FFFD}' } else { c })
            .collect();
        out.extend_from_slice(safe.as_bytes());
    }
}

fn is_unsafe_csv_char(c: char) -> bool {
    !matches!(c, '\r' | '\n' | '\t') && is_unsafe_char(c)
}

/// Stream the sessions of `range` for each license in turn to `out`.
pub async fn write_csv(
    client: &AdminClient,
    licenses: &[String],
    range: Range,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    for (i, id) in licenses.iter().enumerate() {
        let query = SessionsQuery {
            license: Some(id),
            from: Some(range.from),
            to: Some(range.to),
            ..SessionsQuery::default()
        };
        let stream = client.sessions_csv(&query).await?;
        let mut stream = std::pin::pin!(stream);
        let mut relay = CsvRelay::new(i > 0);
        loop {
            let next = tokio::time::timeout(CHUNK_IDLE, stream.next())
                .await
                .with_context(|| {
                    format!(
                        "the server sent nothing for {}s in the CSV of {}",
                        CHUNK_IDLE.as_secs(),
                        crate::report::clean(id)
                    )
                })?;
            let Some(chunk) = next else { break };
            buf.clear();
            relay.feed(chunk?.as_ref(), &mut buf);
            out.write_all(&buf)?;
        }
        buf.clear();
        relay.finish(&mut buf);
        out.write_all(&buf)?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = "seat_id,holder\r\na1,alice\r\nb2,\"'=bob\"\r\n";
    const SECOND: &str = "seat_id,holder\r\nc3,Zoë\r\n";

    fn relay_all(chunks: &[&[u8]], skip_header: bool) -> String {
        let mut relay = CsvRelay::new(skip_header);
        let mut out = Vec::new();
        for c in chunks {
            relay.feed(c, &mut out);
        }
        relay.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn header_once_across_licenses_in_any_chunking() {
        let joined = relay_all(&[FIRST.as_bytes()], false) + &relay_all(&[SECOND.as_bytes()], true);
        assert_eq!(
            joined,
            "seat_id,holder\r\na1,alice\r\nb2,\"'=bob\"\r\nc3,Zoë\r\n"
        );
        // Byte by byte (splitting the two bytes of 'ë') gives the same.
        let bytes: Vec<&[u8]> = SECOND.as_bytes().chunks(1).collect();
        assert_eq!(relay_all(&bytes, true), "c3,Zoë\r\n");
        assert_eq!(relay_all(&bytes, false), SECOND);
    }

    #[test]
    fn a_last_line_without_line_end_is_kept() {
        assert_eq!(relay_all(&[b"h\na", b"b"], false), "h\nab");
        assert_eq!(relay_all(&[b"h"], true), "");
        assert_eq!(relay_all(&[], true), "");
    }

    #[test]
    fn terminal_controls_are_replaced_but_csv_whitespace_stays() {
        let out = relay_all(&["h\nx,\"a\tb\rc\u{1b}[2J\u{202e}\"\r\n".as_bytes()], false);
        assert_eq!(out, "h\nx,\"a\tb\rc\u{fffd}[2J\u{fffd}\"\r\n");
    }
}
