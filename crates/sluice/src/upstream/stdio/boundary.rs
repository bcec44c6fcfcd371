//! What keeps the processes Sluice starts away from Sluice itself.
//!
//! At startup ([`harden`], the first thing `main` does, before any thread or child), Sluice makes
//! itself non-dumpable: its `/proc/<pid>/environ`, `mem`, `maps` and `fd` then belong to root,
//! and ptrace is refused, to every process without CAP_SYS_PTRACE, a stdio server running under
//! Sluice's own uid included; the state keys, bearer tokens and secrets it read stay its own.
//! It clears its ambient and inheritable capability sets and sets `no_new_privs`
//! (`capabilities`): a process it starts gets no capability from it (a launcher's `setpriv
//! --ambient-caps`, systemd's `AmbientCapabilities=`, would otherwise pass Sluice's CAP_SETUID to
//! every server, which could become root) and gains none by exec (setuid programs and file
//! capabilities give nothing).
//! It also becomes a child subreaper: an orphan among its descendants is handed to Sluice, not to
//! init, and `reaper` ends it. All of these hold on Linux only. And it closes the descriptors it
//! inherited past stdin, stdout and stderr, which its children would inherit in turn.
//!
//! Takes a stdio upstream's `user` and `group` and Sluice's own [`Credentials`]; refuses (at
//! startup, on reload and in `sluice check`) a switch Sluice cannot make, or could not undo: a
//! uid or gid other than its own without CAP_SETUID and CAP_SETGID, a user switch without
//! CAP_KILL (Sluice could not end the processes, nor what they leave behind), or a user switch
//! by a non-root Sluice that holds supplementary groups (only a root Sluice has them cleared
//! for the child). Gives a warning when the processes would run as root: root holds
//! CAP_SYS_PTRACE, and no flag of Sluice's keeps it from reading Sluice's memory.

pub mod capabilities;

use crate::config::StdioConfig;

/// Makes Sluice non-dumpable, clears the capabilities its children would inherit, sets
/// `no_new_privs`, makes it a child subreaper, closes what it inherited past stdin, stdout and
/// stderr, and turns the orphan reaper on. Call it once, first thing in `main`, while the
/// process has one thread and no child.
pub fn harden() -> Result<(), String> {
    close_inherited();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        nix::sys::prctl::set_dumpable(false).map_err(|e| {
            format!("cannot make Sluice non-dumpable (prctl PR_SET_DUMPABLE): {e}; the processes it starts could read its secrets")
        })?;
        capabilities::clear_inheritable()?;
        nix::sys::prctl::set_no_new_privs().map_err(|e| {
            format!("cannot set no_new_privs (prctl PR_SET_NO_NEW_PRIVS): {e}; the processes Sluice starts could gain privileges by exec")
        })?;
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| {
            format!("cannot make Sluice a child subreaper (prctl PR_SET_CHILD_SUBREAPER): {e}; what its stdio servers leave behind could outlive it")
        })?;
        super::reaper::enable();
        Ok(())
    }
    // Elsewhere none holds (docs/security.md says so): nothing to set, no orphan to sweep.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    Ok(())
}

/// Closes every descriptor Sluice inherited past 0, 1 and 2 (a launcher's pipe, a file it
/// left open without close-on-exec): Sluice uses none, and each would reach every process it
/// starts. Its own are all close-on-exec (std and tokio open them so).
fn close_inherited() {
    let listed = std::fs::read_dir("/proc/self/fd").map(|d| {
        d.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .collect()
    });
    let fds: Vec<i32> = listed.unwrap_or_default();
    // The listing's own descriptor is among them, closed already (EBADF).
    for fd in fds.into_iter().filter(|&fd| fd > 2) {
        let _ = nix::unistd::close(fd);
    }
}

/// Who Sluice runs as, and what it may switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Real gid.
    pub gid: u32,
    /// Effective gid.
    pub egid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// CAP_SETUID is effective.
    pub cap_setuid: bool,
    /// CAP_SETGID is effective.
    pub cap_setgid: bool,
    /// CAP_KILL is effective (signalling a process of another user needs it).
    pub cap_kill: bool,
    /// Every effective capability, one bit each (`CapEff`).
    pub effective: u64,
}

impl Credentials {
    /// This process's (capabilities from `/proc/self/status`; without it, those of its euid).
    pub fn current() -> Credentials {
        use nix::unistd;
        let euid = unistd::geteuid().as_raw();
        let caps = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("CapEff:"))
                    .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
            })
            .unwrap_or(if euid == 0 { u64::MAX } else { 0 });
        Credentials {
            uid: unistd::getuid().as_raw(),
            euid,
            gid: unistd::getgid().as_raw(),
            egid: unistd::getegid().as_raw(),
            groups: unistd::getgroups()
                .map(|g| g.iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default(),
            cap_setuid: caps & capabilities::CAP_SETUID != 0,
            cap_setgid: caps & capabilities::CAP_SETGID != 0,
            cap_kill: caps & capabilities::CAP_KILL != 0,
            effective: caps,
        }
    }
}

/// Whether Sluice, as `me`, can start upstream `name`'s processes as its `user` and `group`:
/// an error saying what is missing and what to do, or a warning when they would run as root.
pub fn check_run_as(
    name: &str,
    cfg: &StdioConfig,
    me: &Credentials,
) -> Result<Option<String>, String> {
    let who = format!("Sluice runs as uid {} gid {}", me.euid, me.egid);
    let switch_uid = cfg.uid().filter(|&u| u != me.uid || u != me.euid);
    let switch_gid = cfg.gid().filter(|&g| g != me.gid || g != me.egid);
    if let (Some(uid), Some(user)) = (switch_uid, &cfg.user) {
        // Switching the user clears the groups too (setgroups, CAP_SETGID).
        if !(me.cap_setuid && me.cap_setgid) {
            return Err(format!(
                "upstream '{name}': user = {:?} (uid {uid}): {who} without CAP_SETUID and CAP_SETGID, so it cannot start a process as another user; run Sluice as root (or with both capabilities), or remove user",
                user.written
            ));
        }
        // Ending them (and what they leave behind) is signalling another user's processes.
        if !me.cap_kill {
            return Err(format!(
                "upstream '{name}': user = {:?} (uid {uid}): {who} without CAP_KILL, so it could not end the processes it starts as another user, nor what they leave behind; give Sluice CAP_KILL too (setpriv --inh-caps +kill --ambient-caps +kill, systemd AmbientCapabilities=CAP_KILL), run it as root, or remove user",
                user.written
            ));
        }
        // std clears the child's supplementary groups only when Sluice's real uid is 0.
        if me.uid != 0 && me.groups.iter().any(|&g| Some(g) != cfg.gid()) {
            return Err(format!(
                "upstream '{name}': user = {:?}: {who} with supplementary groups {:?}, which a process it starts as another user would keep; start Sluice without them (setpriv --clear-groups) or as root",
                user.written, me.groups
            ));
        }
    }
    if let (Some(gid), None) = (switch_gid, switch_uid) {
        if !me.cap_setgid {
            let shown = cfg
                .group
                .as_ref()
                .map_or_else(|| gid.to_string(), |g| g.written.clone());
            return Err(format!(
                "upstream '{name}': group = {shown:?} (gid {gid}): {who} without CAP_SETGID, so it cannot start a process in another group; run Sluice as root (or with CAP_SETGID), or remove group"
            ));
        }
    }
    if cfg.uid().unwrap_or(me.euid) == 0 {
        return Ok(Some(format!(
            "upstream '{name}': its processes run as root, and a root process can read Sluice's memory and environment (its keys and tokens) whatever Sluice does; set user = \"…\" to an unprivileged user of their own"
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
