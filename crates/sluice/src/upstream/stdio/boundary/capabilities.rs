//! Sluice's own Linux capabilities, as far as the processes it starts are concerned.
//!
//! At startup ([`clear_inheritable`], from `harden`, before any thread or child) Sluice empties
//! its ambient and inheritable sets: whatever launched it with capabilities there (`setpriv
//! --ambient-caps`, systemd's `AmbientCapabilities=`), a process it starts inherits none of
//! them. It keeps its own permitted and effective sets: a user switch needs them.
//!
//! Takes the config and Sluice's [`Credentials`]; gives what the config needs Sluice to hold
//! ([`needed`]: CAP_SETUID, CAP_SETGID and CAP_KILL to run a stdio server as another user,
//! CAP_SETGID to run one in another group, CAP_NET_BIND_SERVICE to listen on a port under 1024)
//! and one warning per process life ([`warn_once`]) naming the effective capabilities Sluice
//! holds beyond those, and those it found in its ambient or inheritable set and cleared.
//! Refuses nothing: what a user switch lacks is refused by `check_run_as`.

use super::Credentials;
use crate::config::Config;

/// The bit of CAP_KILL in a capability mask (`CapEff`).
pub const CAP_KILL: u64 = 1 << 5;
/// The bit of CAP_SETGID.
pub const CAP_SETGID: u64 = 1 << 6;
/// The bit of CAP_SETUID.
pub const CAP_SETUID: u64 = 1 << 7;
/// The bit of CAP_NET_BIND_SERVICE.
pub const CAP_NET_BIND_SERVICE: u64 = 1 << 10;

/// What Sluice's ambient and inheritable sets held when it started (cleared since).
static INHERITED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Empties Sluice's ambient and inheritable sets (lowering them needs no privilege), noting
/// what they held. Linux only; run while Sluice has one thread (the sets are per thread, and
/// the threads it starts later copy them).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn clear_inheritable() -> Result<(), String> {
    use caps::CapSet;
    let failed = |set: &str, e: caps::errors::CapsError| {
        format!("cannot clear Sluice's {set} capabilities: {e}; the processes it starts would inherit them")
    };
    let mut held = caps::read(None, CapSet::Inheritable).map_err(|e| failed("inheritable", e))?;
    // Ambient capabilities exist from Linux 4.3; before, there are none to clear.
    if caps::runtime::ambient_set_supported().is_ok() {
        held.extend(caps::read(None, CapSet::Ambient).map_err(|e| failed("ambient", e))?);
        caps::clear(None, CapSet::Ambient).map_err(|e| failed("ambient", e))?;
    }
    caps::clear(None, CapSet::Inheritable).map_err(|e| failed("inheritable", e))?;
    let mask = held.iter().fold(0u64, |m, c| m | c.bitmask());
    INHERITED.store(mask, std::sync::atomic::Ordering::Release);
    Ok(())
}

/// The capabilities `cfg` needs Sluice, as `me`, to hold.
pub fn needed(cfg: &Config, me: &Credentials) -> u64 {
    let mut mask = 0;
    for s in cfg.upstreams.iter().filter_map(|u| u.stdio.as_ref()) {
        if s.uid().is_some_and(|u| u != me.uid || u != me.euid) {
            mask |= CAP_SETUID | CAP_SETGID | CAP_KILL;
        }
        if s.gid().is_some_and(|g| g != me.gid || g != me.egid) {
            mask |= CAP_SETGID;
        }
    }
    let listens = std::iter::once(cfg.listen).chain(cfg.cluster.as_ref().map(|c| c.listen));
    if listens.map(|a| a.port()).any(|p| (1..1024).contains(&p)) {
        mask |= CAP_NET_BIND_SERVICE;
    }
    mask
}

/// The warning for effective capabilities `held` beyond `needed`, and for `inherited` ones
/// (cleared at startup); `None` when there is nothing to say.
pub fn warning(held: u64, needed: u64, inherited: u64) -> Option<String> {
    let extra = held & !needed;
    let mut parts = Vec::new();
    if inherited != 0 {
        parts.push(format!(
            "Sluice was started with {} in its ambient or inheritable set, which every process it starts would have inherited: it cleared them and set no_new_privs, so its stdio servers get no capability and gain none by exec (a server that needs one must get it another way: its own container)",
            listed(inherited)
        ));
    }
    if extra != 0 {
        let keep = if needed == 0 {
            "none".to_owned()
        } else {
            listed(needed)
        };
        parts.push(format!(
            "Sluice holds capabilities this config does not need: {}; none passes to a process it starts, but a flaw in Sluice could use them; start it with only what it needs (here {keep}: systemd CapabilityBoundingSet= and AmbientCapabilities=, docker --cap-drop=ALL --cap-add=…, or an unprivileged user)",
            listed(extra)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Logs [`warning`] for Sluice as it runs now and `cfg`, once per process life (a reload does
/// not repeat it).
pub fn warn_once(cfg: &Config) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        let me = Credentials::current();
        let inherited = INHERITED.load(std::sync::atomic::Ordering::Acquire);
        if let Some(w) = warning(me.effective, needed(cfg, &me), inherited) {
            tracing::warn!("{w}");
        }
    });
}

/// The names of the capabilities of `mask`, the first eight of them and how many more.
fn listed(mask: u64) -> String {
    const SHOWN: usize = 8;
    let names = names(mask);
    let more = names.len().saturating_sub(SHOWN);
    let mut out = names.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

/// The capability names of `mask`, in bit order (CAP_CHOWN first).
fn names(mask: u64) -> Vec<String> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let mut known: Vec<caps::Capability> = caps::all()
            .into_iter()
            .filter(|c| mask & c.bitmask() != 0)
            .collect();
        known.sort_by_key(|c| c.index());
        let named: u64 = known.iter().fold(0, |m, c| m | c.bitmask());
        let mut out: Vec<String> = known.iter().map(|c| c.to_string()).collect();
        // Bits newer than the crate's list, by number.
        out.extend(
            (0..64)
                .filter(|b| (mask & !named) & (1u64 << b) != 0)
                .map(|b| format!("capability {b}")),
        );
        out
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    (0..64)
        .filter(|b| mask & (1u64 << b) != 0)
        .map(|b| format!("capability {b}"))
        .collect()
}
