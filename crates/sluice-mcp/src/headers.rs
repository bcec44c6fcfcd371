//! MCP HTTP header names and the `=?base64?…?=` value codec (digest §5.2).
//!
//! Takes raw header values; gives decoded UTF-8 text, or the header-safe encoding of a value.
//! Refuses values that are not visible ASCII, a sentinel whose Base64 is not canonical
//! (bad padding or alphabet), and decoded bytes that are not UTF-8.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::borrow::Cow;

use http::{HeaderName, HeaderValue};

/// `MCP-Protocol-Version`: the request's protocol version, mirrored from `_meta`.
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method`: the JSON-RPC method, mirrored from the body.
pub const METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`: `params.name` or `params.uri`, mirrored from the body.
pub const NAME: HeaderName = HeaderName::from_static("mcp-name");
/// Prefix of the headers that mirror `x-mcp-header` annotated tool arguments.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// `Mcp-Session-Id`: the legacy session header.
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Why a header value could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The raw value holds bytes outside visible ASCII, space and tab.
    #[error("header value holds characters outside visible ASCII")]
    NotAscii,
    /// The `=?base64?…?=` payload is not canonical standard Base64.
    #[error("header value has invalid Base64 (check padding and alphabet)")]
    BadBase64,
    /// The Base64 payload does not decode to UTF-8 text.
    #[error("header value's Base64 payload is not UTF-8")]
    NotUtf8,
}

/// Decodes one header value: trims surrounding whitespace, decodes a value wrapped in both
/// sentinel ends, and takes any other value literally.
pub fn decode(raw: &HeaderValue) -> Result<Cow<'_, str>, DecodeError> {
    let text = raw.to_str().map_err(|_| DecodeError::NotAscii)?;
    decode_str(text)
}

/// [`decode`] for a value already known to be ASCII text.
pub fn decode_str(text: &str) -> Result<Cow<'_, str>, DecodeError> {
    if !text
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return Err(DecodeError::NotAscii);
    }
    let text = text.trim_matches([' ', '\t']);
    let inner = text
        .strip_prefix(SENTINEL_START)
        .and_then(|rest| rest.strip_suffix(SENTINEL_END));
    match inner {
        None => Ok(Cow::Borrowed(text)),
        Some(b64) => {
            let bytes = STANDARD.decode(b64).map_err(|_| DecodeError::BadBase64)?;
            String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| DecodeError::NotUtf8)
        }
    }
}

/// Encodes a value for a header: as-is when it is plain visible ASCII without surrounding
/// whitespace and does not look like the sentinel; otherwise `=?base64?…?=`.
pub fn encode(value: &str) -> std::borrow::Cow<'_, str> {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
        && !(value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END));
    if plain {
        std::borrow::Cow::Borrowed(value)
    } else {
        std::borrow::Cow::Owned(format!(
            "{SENTINEL_START}{}{SENTINEL_END}",
            STANDARD.encode(value)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sentinel_values_decode_and_plain_values_stay_literal() {
        assert_eq!(
            decode_str("=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(),
            "Hello, 世界"
        );
        assert_eq!(decode_str("  echo \t").unwrap(), "echo");
        assert_eq!(decode_str("=?base64?abc").unwrap(), "=?base64?abc");
        assert_eq!(decode_str("abc?=").unwrap(), "abc?=");
    }

    #[test]
    fn bad_base64_padding_or_alphabet_is_refused() {
        assert_eq!(
            decode_str("=?base64?SGVsbG8?="),
            Err(DecodeError::BadBase64)
        );
        assert_eq!(
            decode_str("=?base64?SGVs*G8=?="),
            Err(DecodeError::BadBase64)
        );
        assert_eq!(decode_str("=?base64?//79?="), Err(DecodeError::NotUtf8));
    }

    #[test]
    fn encode_matches_the_spec_examples() {
        assert_eq!(encode("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(encode(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(encode("get_weather"), "get_weather");
    }

    proptest! {
        #[test]
        fn encode_then_decode_round_trips(s in "\\PC*") {
            let enc = encode(&s);
            let value = HeaderValue::from_str(&enc).unwrap();
            prop_assert_eq!(decode(&value).unwrap(), s);
        }
    }
}
