//! Protocol versions Sluice knows, by era.
//!
//! Takes a version string; gives whether the modern front door serves it. Refuses nothing.

/// The one modern version this build of Sluice serves statelessly.
pub const MODERN: &str = "2026-07-28";

/// Versions the modern front door accepts (what `server/discover` lists as `supportedVersions`).
pub const SUPPORTED_MODERN: &[&str] = &[MODERN];

/// Handshake-era versions (2025-11-25 and older) that legacy clients and servers speak.
pub const LEGACY: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Whether the modern front door serves `v`.
pub fn is_supported_modern(v: &str) -> bool {
    SUPPORTED_MODERN.contains(&v)
}

/// Whether `v` names a handshake-era version.
pub fn is_legacy(v: &str) -> bool {
    LEGACY.contains(&v)
}
