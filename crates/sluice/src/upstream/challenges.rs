//! The Bearer challenges upstreams answered to requests that carried a token: where a user's
//! upstream that says `403 insufficient_scope` names the scope it wants (read after the answer,
//! by whoever sent the token; `oauth/user`'s step-up).
//!
//! Takes a sent `Authorization` value and the `WWW-Authenticate` of a 401 or 403 answer to it;
//! gives that challenge once, to the first who asks with the same value. Bounded: at most
//! [`MAX`] challenges held (all dropped when full: an answer not read soon is not needed);
//! keyed by a SHA-256 of the value, so no token is held here.

use std::collections::HashMap;
use std::sync::Mutex;

use http::HeaderValue;
use sha2::Digest as _;

/// Challenges held at most.
pub const MAX: usize = 4096;

/// The challenges not read yet.
#[derive(Default)]
pub struct Challenges(Mutex<HashMap<[u8; 32], String>>);

fn key(sent: &HeaderValue) -> [u8; 32] {
    sha2::Sha256::digest(sent.as_bytes()).into()
}

impl Challenges {
    /// Notes `www`, the challenge of a 401 or 403 answer to a request that sent `sent`.
    pub fn note(&self, sent: &HeaderValue, www: &HeaderValue) {
        let (Ok(mut m), Ok(text)) = (self.0.lock(), www.to_str()) else {
            return;
        };
        if m.len() >= MAX {
            m.clear();
        }
        m.insert(key(sent), text.chars().take(1024).collect());
    }

    /// The challenge answered to `sent`, once.
    pub fn take(&self, sent: &HeaderValue) -> Option<String> {
        self.0.lock().ok()?.remove(&key(sent))
    }
}
