//! The records the login front keeps (`store.rs` holds them): a client, a sign-in under way,
//! an authorization code, a refresh token family.
//!
//! Takes nothing and refuses nothing: plain data. No record prints a secret (`Debug` is not
//! derived on the ones that hold the IdP's verifier and nonce).

use super::checks::Hashed;

/// How a client came to be known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Dynamic Client Registration (RFC 7591).
    Registered,
    /// A Client ID Metadata Document at its `client_id` URL.
    Document,
}

/// A client that may ask for codes.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// A sign-in under way: what `/authorize` was asked, and what Sluice sent the IdP.
#[derive(Clone)]
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
    /// The PKCE verifier Sluice sent the IdP the challenge of.
    pub idp_verifier: String,
    /// The nonce the ID token must carry.
    pub idp_nonce: String,
}

/// An authorization code's grant.
#[derive(Clone)]
pub struct Code {
    /// The client it was issued to.
    pub client_id: String,
    /// The redirect URI it was sent to (the token request must repeat it).
    pub redirect_uri: String,
    /// The client's S256 challenge.
    pub code_challenge: String,
    /// Who signed in.
    pub principal: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// The scopes granted.
    pub scope: String,
}

/// A refresh token family: one sign-in's chain of rotated refresh tokens.
#[derive(Clone)]
pub struct Family {
    /// The client.
    pub client_id: String,
    /// Who signed in.
    pub principal: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// The scopes granted.
    pub scope: String,
    /// The hash of the one refresh token that may be used now.
    pub current: Hashed,
    /// Set when a rotated token came back: nothing of the family is honoured again.
    pub revoked: bool,
}
