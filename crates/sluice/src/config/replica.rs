//! A replica's id, checked: the one grammar every replica name meets before Sluice uses it.
//!
//! Takes text that claims to name a replica: `cluster.id` from the config, the owner a sealed
//! `requestState` names, the sender a forward's signed headers name, or the `<replica>` part of
//! an id a 2025-11-25 client sent back (`sluice-<replica>-<n>`, bridge B). Gives a
//! [`ReplicaId`] only for `[A-Za-z0-9._-]{1,64}` (`cluster.id`'s grammar), so what becomes a
//! Redis key (`sluice:r:<id>`), a URL lookup or a log field is never a newline, a space, a
//! quote or a control character a peer chose. Refuses everything else (`None`): an id that
//! does not meet it was not written by Sluice.

/// The most bytes of a replica id.
pub const MAX_LEN: usize = 64;

/// Whether `s` meets `cluster.id`'s grammar: 1 to [`MAX_LEN`] ASCII letters, digits, `.`, `_`
/// or `-`.
pub fn is_valid(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A replica's id that meets [`is_valid`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicaId(String);

impl ReplicaId {
    /// `s` as a replica id, or `None` when it does not meet the grammar.
    pub fn parse(s: &str) -> Option<ReplicaId> {
        is_valid(s).then(|| ReplicaId(s.to_owned()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ReplicaId {
    /// Safe to log as it is: the grammar holds no character that could forge a line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ReplicaId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_id_is_cluster_ids_grammar_and_nothing_else() {
        for good in [
            "r1",
            "sluice-1",
            "a.b_c-D",
            "x",
            &"a".repeat(64),
            "sluice-7d9f8c6b5-x2k4q",
        ] {
            assert_eq!(
                ReplicaId::parse(good).as_ref().map(ReplicaId::as_str),
                Some(good),
                "{good:?}"
            );
        }
        let forged = "r9\n2026-01-01T00:00:00Z ERROR sluice: principal=admin granted root";
        for bad in [
            "",
            &"a".repeat(65),
            forged,
            "r1\n",
            "r 1",
            "r1\r",
            "r\u{1b}[31m",
            "r1\"",
            "r:1",
            "r/1",
            "r1\0",
            "ré",
            "r1\u{2028}",
        ] {
            assert_eq!(ReplicaId::parse(bad), None, "{bad:?}");
        }
    }
}
