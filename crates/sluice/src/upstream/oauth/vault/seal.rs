//! A vault entry sealed at rest: XChaCha20-Poly1305 under a key derived from the `[state]`
//! keys, bound to the (upstream, principal) it is kept for.
//!
//! Takes an entry's bytes, the upstream's name and the principal; gives `version ‖ key id ‖
//! 24-byte random nonce ‖ ciphertext ‖ tag`, with the upstream and the principal as associated
//! data (so a value cannot be moved to another principal or upstream), and opens such a value
//! under whichever key of the ring its id names. Refuses (`None`) a value of another version, an
//! unknown key id, or one whose tag does not verify (altered, or sealed for someone else): the
//! AEAD checks the tag before anything is decrypted, and nothing is parsed before that.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const VERSION: u8 = 1;
/// What the vault's keys are derived for (`Keys::derived`).
pub(super) const DOMAIN: &[u8] = b"sluice/token-vault/v1\0";
const NONCE: usize = 24;

/// The vault's keys: the first seals, any opens.
pub(crate) struct Sealer {
    keys: Vec<(u8, XChaCha20Poly1305)>,
}

impl Sealer {
    /// The ring of `(id, key)`, the sealing key first.
    pub(crate) fn new(keys: Vec<(u8, [u8; 32])>) -> Sealer {
        let keys = keys
            .into_iter()
            .map(|(id, k)| (id, XChaCha20Poly1305::new(&k.into())))
            .collect();
        Sealer { keys }
    }

    /// `plain` sealed for `principal` at `upstream`.
    pub(crate) fn seal(&self, upstream: &str, principal: &str, plain: &[u8]) -> Vec<u8> {
        let Some((id, key)) = self.keys.first() else {
            return Vec::new(); // no key: nothing sealed opens (a ring is never empty)
        };
        let nonce: [u8; NONCE] = rand::random();
        let aad = associated(upstream, principal, *id);
        let msg = Payload {
            msg: plain,
            aad: &aad,
        };
        let Ok(sealed) = key.encrypt(XNonce::from_slice(&nonce), msg) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(2 + NONCE + sealed.len());
        out.extend_from_slice(&[VERSION, *id]);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The plain bytes of a value [`Sealer::seal`] made for `principal` at `upstream`.
    pub(crate) fn open(&self, upstream: &str, principal: &str, value: &[u8]) -> Option<Vec<u8>> {
        let (&[version, id], rest) = value.split_first_chunk::<2>()?;
        if version != VERSION || rest.len() < NONCE {
            return None;
        }
        let (_, key) = self.keys.iter().find(|(k, _)| *k == id)?;
        let (nonce, sealed) = rest.split_at(NONCE);
        let aad = associated(upstream, principal, id);
        let msg = Payload {
            msg: sealed,
            aad: &aad,
        };
        key.decrypt(XNonce::from_slice(nonce), msg).ok()
    }
}

/// The associated data: the version, the key id, and each name with its length before it.
fn associated(upstream: &str, principal: &str, id: u8) -> Vec<u8> {
    let mut aad = vec![VERSION, id];
    for part in [upstream, principal] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Sealer {
        Sealer::new(vec![(2, [7u8; 32]), (1, [9u8; 32])])
    }

    #[test]
    fn a_sealed_entry_opens_for_its_principal_and_upstream_only() {
        let s = ring();
        let v = s.seal("github", "alice", b"refresh-secret");
        assert!(
            !v.windows(6).any(|w| w == b"secret"),
            "the plain text shows"
        );
        assert_eq!(
            s.open("github", "alice", &v).as_deref(),
            Some(&b"refresh-secret"[..])
        );
        assert_eq!(s.open("github", "bob", &v), None);
        assert_eq!(s.open("gitlab", "alice", &v), None);
        // The names' boundary is in the associated data: "ab"+"c" is not "a"+"bc".
        let w = s.seal("ab", "c", b"x");
        assert_eq!(s.open("a", "bc", &w), None);
    }

    #[test]
    fn an_altered_or_foreign_value_is_refused() {
        let s = ring();
        let v = s.seal("github", "alice", b"token");
        for i in 0..v.len() {
            let mut bad = v.clone();
            bad[i] ^= 1;
            assert_eq!(s.open("github", "alice", &bad), None, "byte {i} flipped");
        }
        assert_eq!(s.open("github", "alice", &v[..v.len() - 1]), None);
        assert_eq!(s.open("github", "alice", b""), None);
        let other = Sealer::new(vec![(2, [8u8; 32])]);
        assert_eq!(other.open("github", "alice", &v), None);
    }

    #[test]
    fn an_older_key_of_the_ring_still_opens_what_it_sealed() {
        let old = Sealer::new(vec![(1, [9u8; 32])]);
        let v = old.seal("github", "alice", b"token");
        assert_eq!(
            ring().open("github", "alice", &v).as_deref(),
            Some(&b"token"[..])
        );
        // And the ring seals under its first key.
        let fresh = ring().seal("github", "alice", b"token");
        assert_eq!(fresh[1], 2);
        assert_eq!(old.open("github", "alice", &fresh), None);
    }
}
