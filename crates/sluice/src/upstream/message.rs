//! One message an upstream sent, typed: its text as it came (forwarded untouched when nothing
//! must change) and its head decoded once (id, method, params, result, error), so no stage
//! parses it again to learn what it is.
//!
//! Takes the text of one SSE event, stdio line or JSON answer; gives a [`Message`]. Refuses
//! text that is not one JSON-RPC object (an array, a number, a named SSE event of another
//! kind): [`Message::decode`] hands the text back, and the streams skip it.

use crate::mcp::jsonrpc::Incoming;

/// One JSON-RPC message from an upstream, decoded.
#[derive(Debug)]
pub struct Message {
    text: String,
    head: Incoming,
}

impl Message {
    /// The message in `text`, or the text back when it is not one JSON-RPC object.
    pub fn decode(text: String) -> Result<Message, String> {
        match Incoming::parse_str(&text) {
            Ok(head) => Ok(Message { text, head }),
            Err(_) => Err(text),
        }
    }

    /// Its id, method, params, result and error, decoded.
    pub fn head(&self) -> &Incoming {
        &self.head
    }

    /// Its text, as the upstream wrote it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its text, owned.
    pub fn into_text(self) -> String {
        self.text
    }

    /// Its size in bytes (what a bounded queue counts).
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// Whether its text is empty (never, for a decoded message).
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_one_object_and_hands_back_the_rest() {
        let m = Message::decode(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.into()).unwrap();
        assert!(m.head().is_response());
        assert_eq!(m.len(), m.text().len());
        for bad in ["[1]", "ping", "", "{\"jsonrpc\":"] {
            assert_eq!(Message::decode(bad.into()).unwrap_err(), bad);
        }
    }
}
