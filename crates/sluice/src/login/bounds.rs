//! The login front's bounds, one place for both stores (`store.rs` in memory, `shared.rs` in
//! Redis) and the manual (docs/login.md).
//!
//! Takes and gives nothing but these constants; refuses nothing.

use std::time::Duration;

/// Registered clients held at most.
pub const MAX_CLIENTS: usize = 10_000;
/// How long a dynamic registration lives.
pub const REGISTRATION_TTL: Duration = Duration::from_secs(7 * 86_400);
/// Sign-ins under way at the IdP held at most.
pub const MAX_PENDING: usize = 10_000;
/// How long a sign-in may take at the IdP (consent page to callback).
pub const PENDING_TTL: Duration = Duration::from_secs(600);
/// Authorization codes held at most.
pub const MAX_CODES: usize = 10_000;
/// How long an authorization code lives.
pub const CODE_TTL: Duration = Duration::from_secs(60);
/// Refresh token families held at most.
pub const MAX_FAMILIES: usize = 100_000;
/// Sources whose registrations are counted at most (a full table refuses new sources).
pub const MAX_SOURCES: usize = 10_000;
/// Dynamic registrations one source (IP address) may make per minute.
pub const REGISTRATIONS_PER_MINUTE: u32 = 10;
/// Sign-ins one source (IP address) may begin at `/authorize` per minute (each holds a place
/// among [`MAX_PENDING`] for [`PENDING_TTL`]).
pub const AUTHORIZATIONS_PER_MINUTE: u32 = 30;
