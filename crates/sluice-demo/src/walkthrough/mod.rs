//! The scripted client of `sluice demo --walkthrough`: each step prints what it sent, what came
//! back, and whether it held.
//!
//! Takes the gateway URL and the tallies of what the `repo` and `alpha` upstreams saw; gives
//! `true` only when every step held. Refuses nothing.
//!
//! The steps, in order: the front door ([`basics`]: discovery, federation, routing, the
//! envelope's refusals), bridge A's two-round tool ([`summarize`]), the same bridge in front of a
//! stdio server ([`stdio`]), the round cap against a loop bomb ([`bomb`]), and the policy's
//! approval round ([`approval`]).

mod approval;
mod basics;
mod bomb;
mod client;
mod stdio;
mod summarize;

use super::upstream::Seen;

/// The steps run so far: how many, and whether all held.
struct Steps {
    ok: bool,
    n: usize,
}

impl Steps {
    /// Prints step `what` with its `detail` and whether it `held`.
    fn check(&mut self, what: &str, held: bool, detail: String) {
        self.n += 1;
        self.ok &= held;
        println!(
            "\n{}. {what}\n   {detail}\n   {}",
            self.n,
            if held { "✓ held" } else { "✗ FAILED" }
        );
    }
}

/// Runs every step against `url`; `repo` and `alpha` are what those upstreams saw.
pub async fn run(url: &str, repo: &Seen, alpha: &Seen) -> bool {
    let c = client::Client::new(url);
    let mut s = Steps { ok: true, n: 0 };
    basics::discover(&c, &mut s).await;
    let listed = basics::federation(&c, &mut s).await;
    basics::legacy_listing(&listed, &mut s);
    basics::routing(&c, &mut s).await;
    basics::refusals(&c, &mut s).await;
    basics::notification(&c, &mut s).await;
    summarize::run(&c, &mut s).await;
    stdio::run(&c, &mut s).await;
    bomb::run(&c, &mut s, repo).await;
    approval::run(&c, &mut s, alpha).await;
    s.ok
}
