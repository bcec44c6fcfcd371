//! The ways Sluice speaks to an upstream, as a closed set: the era it speaks ([`Wire`], as
//! probed), its 2025-11-25 side when it speaks both ([`LegacySide`]), and the wire an upstream is
//! spoken to on ([`Client`]: one arm for each of Streamable HTTP 2026-07-28, 2025-11-25
//! sessions, 2024-11-05 HTTP+SSE and stdio).
//!
//! Takes an upstream's configured transport and its probed status; gives the [`Client`] arm
//! `link/` matches on, exhaustively, for every operation (a new wire does not compile until
//! each operation says what it does there). Refuses nothing.

use std::time::Duration;

/// How Sluice speaks to one upstream: the arm `link/` switches on for every operation, each
/// reading messages as one typed stream (`client::Messages`, yielding decoded messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// 2026-07-28 Streamable HTTP, stateless: a POST for each request, answered with JSON or
    /// an event stream (`Upstream::post_modern`, `discover`); one listen stream.
    Streamable,
    /// 2025-11-25 Streamable HTTP: sessions Sluice opens and pools (`Mcp-Session-Id`), each
    /// with its GET stream (`legacy::session`).
    Sessions,
    /// 2024-11-05 HTTP+SSE: a GET stream for each session, messages POSTed to the endpoint it
    /// names (`legacy::sse`); every answer comes on that stream.
    Sse,
    /// A stdio server: on `Wire::Modern`, one process shared by every request
    /// (`stdio::shared`); on `Wire::Legacy`, a process for each session (`legacy::inline`).
    Stdio(Wire),
}

impl Client {
    /// The arm for an upstream that is (or is not) a stdio command or a 2024-11-05 HTTP+SSE
    /// server, and whose probe found `wire`.
    pub fn of(stdio: bool, sse: bool, wire: Wire) -> Client {
        match (stdio, sse, wire) {
            (true, _, wire) => Client::Stdio(wire),
            (false, true, _) => Client::Sse,
            (false, false, Wire::Modern) => Client::Streamable,
            (false, false, Wire::Legacy) => Client::Sessions,
        }
    }

    /// The era it speaks.
    pub fn wire(self) -> Wire {
        match self {
            Client::Streamable => Wire::Modern,
            Client::Sessions | Client::Sse => Wire::Legacy,
            Client::Stdio(wire) => wire,
        }
    }

    /// Its name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Client::Streamable => "streamable-http",
            Client::Sessions => "sessions",
            Client::Sse => "sse-2024-11-05",
            Client::Stdio(_) => "stdio",
        }
    }
}

/// A 2026-07-28 upstream's 2025-11-25 side, as the dual-era probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LegacySide {
    /// No 2025-11-25 handshake (not asked, or it failed).
    #[default]
    None,
    /// It completes `initialize` but gives no `Mcp-Session-Id` (the TypeScript SDK 2.x's
    /// stateless fallback): every request is a fresh server that never saw the client's
    /// capabilities, so it can send that client no request (no sampling, elicitation or roots).
    Stateless,
    /// It keeps 2025-11-25 sessions (an `Mcp-Session-Id`, or a stdio process per session): a
    /// 2025-11-25 client's call may ask mid-call on that wire.
    Sessions,
}

/// How long a dual-era probe's answer stands before the 2025-11-25 handshake is tried again
/// (a server can drop or gain an era on a redeploy).
pub const LEGACY_RECHECK: Duration = Duration::from_secs(300);

/// The era an upstream speaks, as probed: what `link/`, Sluice's one era switch, reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// 2026-07-28, stateless: requests forwarded, rounds sealed, one listen stream.
    #[default]
    Modern,
    /// 2025-11-25 (handshake): sessions Sluice owns, asks bridged (bridge A), list changes on
    /// each session's GET stream.
    Legacy,
}

impl Wire {
    /// Its name in audit records and logs.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Modern => "modern",
            Wire::Legacy => "legacy",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transport_and_era_has_one_arm() {
        use Client::*;
        let m = Wire::Modern;
        let l = Wire::Legacy;
        assert_eq!(Client::of(false, false, m), Streamable);
        assert_eq!(Client::of(false, false, l), Sessions);
        assert_eq!(Client::of(false, true, l), Sse);
        assert_eq!(Client::of(false, true, m), Sse);
        assert_eq!(Client::of(true, false, m), Stdio(m));
        assert_eq!(Client::of(true, false, l), Stdio(l));
        for c in [Streamable, Sessions, Sse, Stdio(m), Stdio(l)] {
            let back = Client::of(matches!(c, Stdio(_)), c == Sse, c.wire());
            assert_eq!(back, c, "{}", c.name());
        }
    }
}
