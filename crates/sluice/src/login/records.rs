//! The records the login front keeps (`store.rs` holds them): a client, a sign-in under way,
//! an authorization code, what a sign-in granted, a refresh token family.
//!
//! Takes nothing and refuses nothing: plain data, written as JSON in the shared store. No
//! record holds a secret: codes, refresh tokens and sign-in ids are keys by their hash only, and
//! the IdP's PKCE verifier and nonce of a sign-in are derived from its id under a state key
//! (`auth::issued`), never stored.

use serde::{Deserialize, Serialize};

use super::checks::Hashed;

/// How a client came to be known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Origin {
    /// Dynamic Client Registration (RFC 7591).
    Registered,
    /// A Client ID Metadata Document at its `client_id` URL.
    Document,
}

/// A client that may ask for codes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    /// Its id (a random one, or its metadata document's URL).
    pub client_id: String,
    /// Its redirect URIs, matched exactly (a loopback one on any port).
    pub redirect_uris: Vec<String>,
    /// The name it gave, for the consent page (escaped there).
    pub client_name: Option<String>,
    /// How it registered.
    pub origin: Origin,
}

/// A sign-in under way: what `/authorize` was asked.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pending {
    /// The client.
    pub client_id: String,
    /// Its name, for the consent page.
    pub client_name: Option<String>,
    /// The redirect URI it asked for (validated).
    pub redirect_uri: String,
    /// The client's `state`, given back as it came.
    pub state: Option<String>,
    /// The client's S256 code challenge.
    pub code_challenge: String,
    /// The scopes granted.
    pub scope: String,
    /// The hash of the browser cookie that binds the sign-in to the browser that consented.
    pub browser: Hashed,
    /// Whether the user consented (then the IdP was asked).
    pub consented: bool,
}

/// What a sign-in granted: to which client, who, their groups and scopes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The client.
    pub client_id: String,
    /// Who signed in.
    pub principal: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// The scopes granted.
    pub scope: String,
}

/// An authorization code's grant.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Code {
    /// The redirect URI it was sent to (the token request must repeat it).
    pub redirect_uri: String,
    /// The client's S256 challenge.
    pub code_challenge: String,
    /// What it grants.
    pub grant: Grant,
}

/// A refresh token family: one sign-in's chain of rotated refresh tokens.
#[derive(Clone, Debug)]
pub struct Family {
    /// What it grants.
    pub grant: Grant,
    /// The hash of the one refresh token that may be used now.
    pub current: Hashed,
    /// Set when a rotated token came back: nothing of the family is honoured again.
    pub revoked: bool,
}

/// What presenting a refresh token to its family did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    /// It was the current one: the next one is current now; the grant.
    Rotated(Grant),
    /// It was an earlier one: the family is revoked now.
    Replayed,
    /// The family was revoked before.
    Revoked,
    /// The family is another client's.
    OtherClient,
    /// No such family (expired, never issued), or the store did not answer.
    Unknown,
}
