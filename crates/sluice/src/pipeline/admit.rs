//! Admission to the MCP endpoint: the requests in progress, and each principal's share of them.
//!
//! Takes an authenticated principal, then its request once its body is read; gives the places
//! the request holds until its response head ([`InFlight`]). A principal's place
//! (`limits.max_in_flight_per_principal`) is taken at authentication, so the bodies it is still
//! sending count against its own share and nobody else's; the place in the pool
//! (`limits.max_in_flight`) only once the request is whole, so a client that holds a body open
//! holds no place others need (its body has `timeouts.body_read_ms` to arrive, `edge.rs`).
//! Refuses past either with [`Full`]: 503, `Retry-After`, code `-31020`, naming the limit.

use std::sync::Arc;

use crate::shares::{Full, Place, Pool, Refused, Shares};

/// The requests in progress, built once (`limits.max_in_flight` is restart-only; the share per
/// principal is read from the generation serving the request).
#[derive(Clone)]
pub struct Admission {
    shares: Arc<Shares<String>>,
    max: usize,
}

/// A request whose principal holds a place of its share; its body is not read yet.
pub struct Entered(Place<String>, usize);

/// A whole, authenticated request in progress: its places are given back when dropped.
pub struct InFlight {
    _place: Place<String>,
}

impl Admission {
    /// `max_in_flight` places.
    pub fn new(max_in_flight: usize) -> Admission {
        Admission {
            shares: Shares::new(max_in_flight),
            max: max_in_flight,
        }
    }

    /// A place of `principal`'s `share` (refused past it); `alone`: it is the one principal
    /// there is (`auth` with no credentials), counted without copying or hashing its id.
    pub fn enter(&self, principal: &str, share: usize, alone: bool) -> Result<Entered, Full> {
        let place = if alone {
            self.shares.share_keyless(share)
        } else {
            self.shares.share(principal.to_owned(), share)
        };
        place
            .map(|p| Entered(p, self.max))
            .map_err(|r| full(r, self.max))
    }

    /// Requests in progress now (whole ones).
    pub fn in_use(&self) -> usize {
        self.shares.in_use()
    }
}

impl Entered {
    /// The request is whole: a place in the pool (refused, giving the share back, when full).
    pub fn whole(self) -> Result<InFlight, Full> {
        self.0
            .pooled()
            .map(|p| InFlight { _place: p })
            .map_err(|r| full(r, self.1))
    }
}

fn full(r: Refused, max: usize) -> Full {
    match r {
        Refused::Share(n) => Full::share_of(Pool::InFlight, n, max),
        Refused::Pool(n) => Full::pool(Pool::InFlight, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_at_its_share_is_refused_and_others_enter_and_the_pool_counts_whole_requests_only(
    ) {
        let a = Admission::new(3);
        let reading: Vec<Entered> = (0..2)
            .map(|_| a.enter("alice", 2, false).expect("within her share"))
            .collect();
        let refused = a.enter("alice", 2, false).err().expect("past her share");
        assert_eq!(refused.limit(), "limits.max_in_flight_per_principal");
        assert_eq!(a.in_use(), 0, "bodies being read hold no place in the pool");
        let whole: Vec<InFlight> = (0..3)
            .map(|i| {
                a.enter(&format!("p{i}"), 2, false)
                    .unwrap()
                    .whole()
                    .expect("room")
            })
            .collect();
        assert_eq!(a.in_use(), 3);
        let full = a
            .enter("bob", 2, false)
            .unwrap()
            .whole()
            .err()
            .expect("the pool is full");
        assert_eq!(full.limit(), "limits.max_in_flight");
        drop(whole);
        drop(reading);
        assert!(a.enter("alice", 2, false).unwrap().whole().is_ok());
        let one = Admission::new(2);
        let _held: Vec<Entered> = (0..2)
            .map(|_| one.enter("local", 2, true).unwrap())
            .collect();
        let all = one
            .enter("local", 2, true)
            .err()
            .expect("a share that is the whole pool");
        assert_eq!(
            all.limit(),
            "limits.max_in_flight",
            "named as the pool, not a share of it"
        );
    }
}
