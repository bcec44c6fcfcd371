//! Server-Sent Events: an incremental reader for upstream streams and the frame writer.
//!
//! Takes byte chunks as they arrive; gives complete events (their joined `data:` lines and
//! `event:` name), and remembers the stream's last `id:` and `retry:` (where a 2025-11-25 stream
//! that ends early is taken up again, SEP-1699). Never relays ids, retries or comments. Refuses
//! (the reader reports [`TooLarge`], the caller ends the stream) an event whose joined data is
//! over the configured bound, and any line, finished or not, longer than it (bytes before its
//! `\n`), so the outcome does not depend on how the stream was chunked. Bounded work: every byte
//! pushed is searched for `\n` once (the reader remembers how far it looked) and parsed once,
//! whatever the chunk sizes; the buffer holds at most one unfinished line.

use bytes::{Bytes, BytesMut};

/// One complete SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, empty when absent.
    pub name: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// An event grew past the configured bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("SSE event larger than {0} bytes")]
pub struct TooLarge(pub usize);

/// Buffer capacity kept after a large line has been read (bytes).
const SHRINK_ABOVE: usize = 64 << 10;

/// Incremental SSE reader.
#[derive(Debug)]
pub struct Reader {
    /// Bytes of the unfinished line (after the last `\n` seen).
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no `\n`.
    searched: usize,
    event: Partial,
    max: usize,
    /// Bytes examined so far (searched plus parsed), for the fuzz target's no-rescan check.
    work: u64,
}

/// The event being assembled.
#[derive(Debug, Default)]
struct Partial {
    name: String,
    /// The joined `data:` lines, `None` until the first one.
    data: Option<String>,
    /// The `id:` of the event being read (the SSE "last event ID buffer": it outlives events).
    id_buffer: Option<String>,
    /// The id of the last event dispatched (a blank line copies the buffer here): an event cut
    /// off before its end does not count as received.
    last_id: Option<String>,
    /// The last valid `retry:` (milliseconds, ASCII digits only).
    retry_ms: Option<u64>,
}

impl Reader {
    /// A reader that refuses events over `max` bytes.
    pub fn new(max: usize) -> Self {
        Reader {
            buf: Vec::new(),
            searched: 0,
            event: Partial::default(),
            max,
            work: 0,
        }
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &self.buf[self.searched..]) {
            let end = self.searched + i;
            self.work += (i + 1) as u64 + (end - start) as u64;
            if end - start > self.max {
                return Err(TooLarge(self.max));
            }
            if let Some(ev) = self.event.line(&self.buf[start..end]) {
                out.push(ev);
            }
            if self.event.data.as_ref().is_some_and(|d| d.len() > self.max) {
                return Err(TooLarge(self.max));
            }
            start = end + 1;
            self.searched = start;
        }
        self.work += (self.buf.len() - self.searched) as u64;
        // Only bytes of this chunk follow the last newline found in it, so this moves at most
        // the chunk's length.
        self.buf.drain(..start);
        if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() <= SHRINK_ABOVE / 4 {
            self.buf.shrink_to(SHRINK_ABOVE / 4); // a long-lived stream keeps no large buffer after a large event
        }
        self.searched = self.buf.len();
        if self.buf.len() > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(out)
    }

    /// The last event id the stream carried, if any (empty ids reset it, as SSE says).
    pub fn last_id(&self) -> Option<&str> {
        self.event.last_id.as_deref()
    }

    /// The reconnection time the stream asked for (`retry:`), in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.event.retry_ms
    }

    /// Bytes the reader has examined: at most twice the bytes pushed (each searched once and
    /// parsed once), however they were chunked.
    #[doc(hidden)]
    pub fn scanned(&self) -> u64 {
        self.work
    }
}

impl Partial {
    /// Applies one line (without its `\n`); gives the event a blank line completes.
    fn line(&mut self, line: &[u8]) -> Option<Event> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.last_id.clone_from(&self.id_buffer);
            let done = self.data.take().map(|data| Event {
                name: std::mem::take(&mut self.name),
                data,
            });
            self.name.clear();
            return done;
        }
        if line.starts_with(b":") {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "event" => self.name = value.to_owned(),
            // An id holding NUL is ignored; an empty one clears the buffer (the SSE rules).
            "id" if !value.contains('\0') => {
                self.id_buffer = Some(value.to_owned()).filter(|v| !v.is_empty())
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms); // one too large to be a number leaves the last
                }
            }
            _ => {} // unknown fields are not relayed
        }
        None
    }
}

/// One frame of an SSE answer as Sluice's stages pass it along: typed until the edge writes it
/// ([`Frame::write`]), so a stage that reads the stream (bridge B, the audit record) takes the
/// message itself, never text it must cut out of a frame again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A JSON-RPC message: compact JSON on one line (see [`Frame::message`]), with the event id
    /// a resumable stream gives it (bridge B's streams to 2025-11-25 clients).
    Message {
        /// The message.
        json: Bytes,
        /// The `id:` field, when the stream can be taken up again from it.
        id: Option<String>,
    },
    /// The priming event of a resumable stream (SEP-1699): an id to take it up from, how soon
    /// to retry, and no data.
    Priming {
        /// The `id:` field.
        id: String,
        /// The `retry:` field, in milliseconds.
        retry_ms: u64,
    },
    /// An event of another name whose data is not a message (the 2024-11-05 transport's
    /// `endpoint`); `data` holds no newline.
    Named {
        /// The `event:` field.
        event: &'static str,
        /// The `data:` field.
        data: String,
    },
    /// A comment line every reader ignores (`: stream open`, keep-alives).
    Comment(&'static str),
    /// Sluice's own in-process mark, on a bridged call's stream, that the upstream ended its
    /// stream early and it was taken up again: bridge B ends its client's stream there too.
    /// Written (should it ever reach a client) as a comment.
    Resumed,
}

/// The comment [`Frame::Resumed`] is written as.
const RESUMED: &str = "the upstream ended its stream early; taken up again";

impl Frame {
    /// A message frame for `json` with no id; a pretty-printed message is compacted first (a
    /// raw newline would end the data line).
    pub fn message(json: &[u8]) -> Frame {
        let compacted = std::str::from_utf8(json).map(super::compact_json);
        let json = match compacted {
            Ok(std::borrow::Cow::Owned(c)) => Bytes::from(c),
            _ => Bytes::copy_from_slice(json),
        };
        Frame::Message { json, id: None }
    }

    /// The message a frame carries, if it carries one.
    pub fn json(&self) -> Option<&Bytes> {
        match self {
            Frame::Message { json, .. } => Some(json),
            _ => None,
        }
    }

    /// How many bytes [`Frame::write`] gives, without writing it.
    pub fn wire_len(&self) -> usize {
        match self {
            Frame::Message { json, id } => json.len() + 23 + id.as_ref().map_or(0, |i| i.len() + 5),
            Frame::Priming { id, retry_ms } => id.len() + retry_ms.to_string().len() + 21,
            Frame::Named { event, data } => event.len() + data.len() + 16,
            Frame::Comment(c) => c.len() + 4,
            Frame::Resumed => RESUMED.len() + 4,
        }
    }

    /// The frame as it goes on the wire.
    pub fn write(&self) -> Bytes {
        match self {
            Frame::Message { json, id } => {
                let id_len = id.as_ref().map_or(0, |i| i.len() + 5);
                let mut out = BytesMut::with_capacity(json.len() + id_len + 24);
                if let Some(id) = id {
                    out.extend_from_slice(b"id: ");
                    out.extend_from_slice(id.as_bytes());
                    out.extend_from_slice(b"\n");
                }
                out.extend_from_slice(b"event: message\ndata: ");
                out.extend_from_slice(json);
                out.extend_from_slice(b"\n\n");
                out.freeze()
            }
            Frame::Priming { id, retry_ms } => {
                Bytes::from(format!("id: {id}\nretry: {retry_ms}\ndata: \n\n"))
            }
            Frame::Named { event, data } => {
                Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
            }
            Frame::Comment(c) => Bytes::from(format!(": {c}\n\n")),
            Frame::Resumed => Bytes::from(format!(": {RESUMED}\n\n")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_joined_and_ids_dropped() {
        let mut r = Reader::new(1024);
        assert!(r
            .push(b"id: 1\nretry: 100\nevent: message\nda")
            .unwrap()
            .is_empty());
        let ev = r
            .push(b"ta: {\"a\":1}\r\n\r\n: keepalive\n\ndata: x\n")
            .unwrap();
        assert_eq!(
            ev,
            vec![Event {
                name: "message".into(),
                data: "{\"a\":1}".into()
            }]
        );
        assert_eq!(r.push(b"\n").unwrap()[0].data, "x");
    }

    #[test]
    fn the_last_id_and_retry_outlive_their_events_and_bad_ones_are_ignored() {
        let mut r = Reader::new(1024);
        assert_eq!((r.last_id(), r.retry_ms()), (None, None));
        r.push(b"id: 7\nretry: 250\ndata: \n\ndata: {}\n\n")
            .unwrap();
        assert_eq!(
            (r.last_id(), r.retry_ms()),
            (Some("7"), Some(250)),
            "kept after an event without an id"
        );
        r.push(b"id: a\0b\nretry: 1s\nretry: -5\ndata: x\n\n")
            .unwrap();
        assert_eq!(
            (r.last_id(), r.retry_ms()),
            (Some("7"), Some(250)),
            "an id with NUL and a retry not all digits are ignored"
        );
        r.push(b"id\ndata: y\n\n").unwrap();
        assert_eq!(r.last_id(), None, "an empty id clears it");
        r.push(b"id: 9\ndata: {\"cut\": ").unwrap();
        assert_eq!(
            r.last_id(),
            None,
            "an event not yet ended is not received: its id does not count"
        );
        r.push(b"1}\n\nretry: 99999999999999999999999\n").unwrap();
        assert_eq!(
            (r.last_id(), r.retry_ms()),
            (Some("9"), Some(250)),
            "dispatched; an overflowing retry leaves the last"
        );
    }

    #[test]
    fn an_oversized_event_is_refused() {
        let mut r = Reader::new(8);
        assert!(r.push(b"data: 0123456789\n").is_err());
    }

    #[test]
    fn a_priming_event_comes_out_with_empty_data() {
        let mut r = Reader::new(64);
        let ev = r.push(b"id: 0\nretry: 1000\ndata: \n\n").unwrap();
        assert_eq!(
            ev,
            vec![Event {
                name: String::new(),
                data: String::new()
            }]
        );
    }

    #[test]
    fn a_large_event_sent_a_byte_at_a_time_is_searched_once() {
        let mut body = b"event: message\ndata: ".to_vec();
        body.extend(std::iter::repeat_n(b'x', 128 << 10));
        body.extend_from_slice(b"\r\n\r\n");
        let mut r = Reader::new(256 << 10);
        let mut events = Vec::new();
        for b in &body {
            events.extend(r.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), 128 << 10);
        assert!(
            r.scanned() <= 2 * body.len() as u64,
            "{} bytes examined for {} pushed",
            r.scanned(),
            body.len()
        );
    }

    #[test]
    fn a_line_over_the_bound_is_refused_however_it_was_chunked() {
        let line = b": a comment longer than sixteen bytes\n";
        assert_eq!(Reader::new(16).push(line), Err(TooLarge(16)), "whole");
        let mut r = Reader::new(16);
        let split = line
            .iter()
            .map(|b| r.push(std::slice::from_ref(b)))
            .find(Result::is_err);
        assert_eq!(split, Some(Err(TooLarge(16))), "a byte at a time");
        assert!(
            Reader::new(16).push(b": sixteen bytes.\n").is_ok(),
            "exactly the bound"
        );
    }

    #[test]
    fn frames_are_written_as_the_wire_has_them() {
        let m = Frame::message(b"{\n  \"a\": 1\n}");
        assert_eq!(m.json().map(|j| &j[..]), Some(&b"{\"a\":1}"[..]));
        assert_eq!(&m.write()[..], b"event: message\ndata: {\"a\":1}\n\n");
        let with_id = Frame::Message {
            json: Bytes::from_static(b"{}"),
            id: Some("3-1".into()),
        };
        assert_eq!(
            &with_id.write()[..],
            b"id: 3-1\nevent: message\ndata: {}\n\n"
        );
        let priming = Frame::Priming {
            id: "3-0".into(),
            retry_ms: 1000,
        };
        assert_eq!(&priming.write()[..], b"id: 3-0\nretry: 1000\ndata: \n\n");
        assert_eq!(
            &Frame::Comment("stream open").write()[..],
            b": stream open\n\n"
        );
        let named = Frame::Named {
            event: "endpoint",
            data: "/sse?session_id=x".into(),
        };
        assert_eq!(
            &named.write()[..],
            b"event: endpoint\ndata: /sse?session_id=x\n\n"
        );
        for f in [
            &m,
            &with_id,
            &priming,
            &named,
            &Frame::Comment("x"),
            &Frame::Resumed,
        ] {
            assert_eq!(f.wire_len(), f.write().len(), "{f:?}");
        }
        let resumed = Frame::Resumed.write();
        assert!(resumed.starts_with(b": ") && resumed.ends_with(b"\n\n"));
        let mut r = Reader::new(1024);
        assert!(r.push(&resumed).unwrap().is_empty(), "a reader ignores it");
    }
}
