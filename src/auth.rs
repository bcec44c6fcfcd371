//! Stage 1b, authentication: who is calling. Principals come from authentication, never from
//! `clientInfo`.
//!
//! Takes the request headers; gives a [`Principal`]. With `auth = none` (the only mode so far,
//! allowed on loopback listeners) everyone is the one local principal.

/// An authenticated caller: the key of budgets, sealed state and upstream session pools.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

impl Principal {
    /// The single principal of `auth = none`.
    pub fn local() -> Principal {
        Principal("local".into())
    }

    /// Its id as written into sealed state and logs.
    pub fn id(&self) -> &str {
        &self.0
    }
}

/// Authenticates a request.
pub fn authenticate(_headers: &http::HeaderMap) -> Principal {
    Principal::local()
}
