//! Server-Sent Events: an incremental reader for upstream streams and the frame writer.
//!
//! Takes byte chunks as they arrive; gives complete events (their joined `data:` lines and
//! `event:` name). Drops `id:`, `retry:` and comment lines: Sluice never relays them. Refuses an
//! event larger than the configured bound (the reader reports it, the caller ends the stream).

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

/// Incremental SSE reader.
#[derive(Debug)]
pub struct Reader {
    buf: BytesMut,
    name: String,
    data: String,
    has_data: bool,
    max: usize,
}

impl Reader {
    /// A reader that refuses events over `max` bytes.
    pub fn new(max: usize) -> Self {
        Reader { buf: BytesMut::new(), name: String::new(), data: String::new(), has_data: false, max }
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line = self.buf.split_to(pos + 1);
            let mut line = &line[..pos];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = String::from_utf8_lossy(line);
            if line.is_empty() {
                if self.has_data {
                    out.push(Event { name: std::mem::take(&mut self.name), data: std::mem::take(&mut self.data) });
                }
                self.name.clear();
                self.has_data = false;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (&*line, ""),
            };
            match field {
                "data" => {
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                "event" => self.name = value.to_owned(),
                _ => {} // id, retry and unknown fields are not relayed
            }
            if self.data.len() > self.max {
                return Err(TooLarge(self.max));
            }
        }
        if self.buf.len() > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(out)
    }
}

/// One SSE frame carrying a compact JSON message on a single `data:` line.
pub fn frame(json: &[u8]) -> Bytes {
    // Relayed upstream messages may be pretty-printed: a raw newline would end the data line.
    let compacted = std::str::from_utf8(json).map(super::compact_json);
    let json = compacted.as_ref().map(|c| c.as_bytes()).unwrap_or(json);
    let mut out = BytesMut::with_capacity(json.len() + 16);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_joined_and_ids_dropped() {
        let mut r = Reader::new(1024);
        assert!(r.push(b"id: 1\nretry: 100\nevent: message\nda").unwrap().is_empty());
        let ev = r.push(b"ta: {\"a\":1}\r\n\r\n: keepalive\n\ndata: x\n").unwrap();
        assert_eq!(ev, vec![Event { name: "message".into(), data: "{\"a\":1}".into() }]);
        assert_eq!(r.push(b"\n").unwrap()[0].data, "x");
    }

    #[test]
    fn an_oversized_event_is_refused() {
        let mut r = Reader::new(8);
        assert!(r.push(b"data: 0123456789\n").is_err());
    }
}
