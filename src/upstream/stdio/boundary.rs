//! What keeps the processes Sluice starts away from Sluice itself.
//!
//! At startup ([`harden`], the first thing `main` does, before any thread or child), Sluice makes
//! itself non-dumpable: its `/proc/<pid>/environ`, `mem`, `maps` and `fd` then belong to root,
//! and ptrace is refused, to every process without CAP_SYS_PTRACE, a stdio server running under
//! Sluice's own uid included; the state keys, bearer tokens and secrets it read stay its own.
//! It clears its ambient and inheritable capability sets and sets `no_new_privs`: a process it
//! starts gets no capability from it (a launcher's `setpriv --ambient-caps`, systemd's
//! `AmbientCapabilities=`, would otherwise pass Sluice's CAP_SETUID to every server, which could
//! become root) and gains none by exec (setuid programs and file capabilities give nothing).
//! It also becomes a child subreaper: an orphan among its descendants is handed to Sluice, not to
//! init, and `reaper` ends it. All of these hold on Linux only. And it closes the descriptors it
//! inherited past stdin, stdout and stderr, which its children would inherit in turn.
//!
//! Takes a stdio upstream's `user` and `group` and Sluice's own [`Credentials`]; refuses (at
//! startup, on reload and in `sluice check`) a switch Sluice cannot make, or could not undo: a
//! uid or gid other than its own without CAP_SETUID and CAP_SETGID, a user switch without
//! CAP_KILL (Sluice could not end the processes, nor what they leave behind), or a user switch
//! by a non-root Sluice that holds supplementary groups (only a root Sluice has them cleared
//! for the child). Gives warnings when the processes would run as root (root holds
//! CAP_SYS_PTRACE, and no flag of Sluice's keeps it from reading Sluice's memory) and when
//! Sluice was started with capabilities they would have inherited (cleared, but said).

use std::sync::OnceLock;

use crate::config::StdioConfig;

/// The capabilities Sluice was started with in its ambient or inheritable set (the ones a
/// process it starts would have inherited), as [`harden`] found them before clearing them.
static INHERITED: OnceLock<Vec<String>> = OnceLock::new();

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
        clear_inheritable()?;
        nix::sys::prctl::set_no_new_privs().map_err(|e| {
            format!("cannot set no_new_privs (prctl PR_SET_NO_NEW_PRIVS): {e}; the processes Sluice starts could gain privileges by exec")
        })?;
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| {
            format!("cannot make Sluice a child subreaper (prctl PR_SET_CHILD_SUBREAPER): {e}; what its stdio servers leave behind could outlive it")
        })?;
        super::reaper::enable();
        Ok(())
    }
    // Elsewhere none holds (the README says so): nothing to set, no orphan to sweep.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    Ok(())
}

/// Empties Sluice's ambient and inheritable sets (lowering them needs no privilege), noting
/// what they held. Sluice keeps its own permitted and effective sets (a user switch needs them).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn clear_inheritable() -> Result<(), String> {
    use caps::CapSet;
    let failed = |set: &str, e: caps::errors::CapsError| {
        format!("cannot clear Sluice's {set} capabilities: {e}; the processes it starts would inherit them")
    };
    // Ambient capabilities exist from Linux 4.3; before, there are none to clear.
    let ambient = caps::runtime::ambient_set_supported().is_ok();
    let mut held = caps::read(None, CapSet::Inheritable).map_err(|e| failed("inheritable", e))?;
    if ambient {
        held.extend(caps::read(None, CapSet::Ambient).map_err(|e| failed("ambient", e))?);
        caps::clear(None, CapSet::Ambient).map_err(|e| failed("ambient", e))?;
    }
    caps::clear(None, CapSet::Inheritable).map_err(|e| failed("inheritable", e))?;
    let mut names: Vec<String> = held.iter().map(|c| c.to_string()).collect();
    names.sort();
    let _ = INHERITED.set(names);
    Ok(())
}

/// Closes every descriptor Sluice inherited past 0, 1 and 2 (a launcher's pipe, a file it
/// left open without close-on-exec): Sluice uses none, and each would reach every process it
/// starts. Its own are all close-on-exec (std and tokio open them so).
fn close_inherited() {
    let listed =
        std::fs::read_dir("/proc/self/fd").map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).collect());
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
    /// The capabilities Sluice was started with that its children would have inherited
    /// (cleared by [`harden`]), by name.
    pub inherited: Vec<String>,
}

/// The bits of CAP_KILL, CAP_SETGID and CAP_SETUID in `CapEff`.
const CAP_KILL: u64 = 1 << 5;
const CAP_SETGID: u64 = 1 << 6;
const CAP_SETUID: u64 = 1 << 7;

impl Credentials {
    /// This process's (capabilities from `/proc/self/status`; without it, those of its euid).
    pub fn current() -> Credentials {
        use nix::unistd;
        let euid = unistd::geteuid().as_raw();
        let caps = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|h| u64::from_str_radix(h.trim(), 16).ok()))
            .unwrap_or(if euid == 0 { u64::MAX } else { 0 });
        Credentials {
            uid: unistd::getuid().as_raw(),
            euid,
            gid: unistd::getgid().as_raw(),
            egid: unistd::getegid().as_raw(),
            groups: unistd::getgroups().map(|g| g.iter().map(|g| g.as_raw()).collect()).unwrap_or_default(),
            cap_setuid: caps & CAP_SETUID != 0,
            cap_setgid: caps & CAP_SETGID != 0,
            cap_kill: caps & CAP_KILL != 0,
            inherited: INHERITED.get().cloned().unwrap_or_default(),
        }
    }
}

/// Whether Sluice, as `me`, can start upstream `name`'s processes as its `user` and `group`:
/// an error saying what is missing and what to do, or the warnings to log (none: all is well).
pub fn check_run_as(name: &str, cfg: &StdioConfig, me: &Credentials) -> Result<Vec<String>, String> {
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
            let shown = cfg.group.as_ref().map_or_else(|| gid.to_string(), |g| g.written.clone());
            return Err(format!(
                "upstream '{name}': group = {shown:?} (gid {gid}): {who} without CAP_SETGID, so it cannot start a process in another group; run Sluice as root (or with CAP_SETGID), or remove group"
            ));
        }
    }
    Ok(warnings(name, cfg, me))
}

/// What to tell the operator about a switch Sluice can make.
fn warnings(name: &str, cfg: &StdioConfig, me: &Credentials) -> Vec<String> {
    let mut out = Vec::new();
    if cfg.uid().unwrap_or(me.euid) == 0 {
        out.push(format!(
            "upstream '{name}': its processes run as root, and a root process can read Sluice's memory and environment (its keys and tokens) whatever Sluice does; set user = \"…\" to an unprivileged user of their own"
        ));
    }
    if !me.inherited.is_empty() {
        out.push(format!(
            "upstream '{name}': Sluice was started with capabilities every process it starts would inherit ({}, ambient or inheritable: setpriv --ambient-caps, systemd AmbientCapabilities=); it cleared them and set no_new_privs, so this upstream's processes get none and gain none by exec; a server that needs a capability must be given it some other way (run it as root, or in a container of its own)",
            me.inherited.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RunGroup, RunUser};

    fn creds(uid: u32, caps: bool, groups: &[u32]) -> Credentials {
        Credentials {
            uid,
            euid: uid,
            gid: uid,
            egid: uid,
            groups: groups.to_vec(),
            cap_setuid: caps,
            cap_setgid: caps,
            cap_kill: caps,
            inherited: Vec::new(),
        }
    }

    fn cfg(user: Option<u32>, group: Option<u32>) -> StdioConfig {
        let mut c = super::super::tests::config("true", 1, 0);
        c.user = user.map(|uid| RunUser { written: uid.to_string(), uid, gid: Some(uid), account: None });
        c.group = group.map(|gid| RunGroup { written: gid.to_string(), gid });
        c
    }

    #[test]
    fn a_user_or_group_sluice_cannot_switch_to_is_refused_saying_what_is_missing() {
        let nobody = creds(65534, false, &[]);
        let e = check_run_as("files", &cfg(Some(0), None), &nobody).unwrap_err();
        assert!(e.contains("upstream 'files'") && e.contains("uid 0") && e.contains("without CAP_SETUID and CAP_SETGID"), "{e}");
        let e = check_run_as("files", &cfg(None, Some(0)), &nobody).unwrap_err();
        assert!(e.contains("group = \"0\"") && e.contains("without CAP_SETGID"), "{e}");
        // Its own ids need no switch.
        assert_eq!(check_run_as("files", &cfg(Some(65534), Some(65534)), &nobody), Ok(vec![]));
        // A non-root Sluice with the capabilities, but groups the child would keep.
        let e = check_run_as("files", &cfg(Some(1000), None), &creds(65534, true, &[27])).unwrap_err();
        assert!(e.contains("supplementary groups [27]") && e.contains("--clear-groups"), "{e}");
        assert_eq!(check_run_as("files", &cfg(Some(1000), None), &creds(65534, true, &[])), Ok(vec![]));
    }

    #[test]
    fn root_may_switch_and_is_warned_of_a_server_left_running_as_root() {
        let root = creds(0, true, &[0]);
        assert_eq!(check_run_as("files", &cfg(Some(65534), None), &root), Ok(vec![]));
        for left_as_root in [cfg(None, None), cfg(None, Some(65534)), cfg(Some(0), None)] {
            let w = check_run_as("files", &left_as_root, &root).expect("allowed").join("\n");
            assert!(w.contains("upstream 'files': its processes run as root") && w.contains("set user"), "{w}");
        }
        // Without the capabilities, root is refused like anyone (a container's dropped caps).
        assert!(check_run_as("files", &cfg(Some(65534), None), &creds(0, false, &[])).is_err());
    }

    #[test]
    fn a_user_switch_without_cap_kill_is_refused_as_sluice_could_not_end_what_it_starts() {
        // setpriv --reuid nobody --inh-caps +setuid,+setgid --ambient-caps +setuid,+setgid: no CAP_KILL.
        let no_kill = Credentials { cap_kill: false, ..creds(65534, true, &[]) };
        let e = check_run_as("files", &cfg(Some(1000), None), &no_kill).unwrap_err();
        assert!(e.contains("upstream 'files': user = \"1000\" (uid 1000)") && e.contains("without CAP_KILL"), "{e}");
        assert!(e.contains("--ambient-caps +kill") && e.contains("or remove user"), "{e}");
        // A root Sluice whose CAP_KILL was dropped (a container's --cap-drop) cannot either.
        let root_no_kill = Credentials { cap_kill: false, ..creds(0, true, &[0]) };
        assert!(check_run_as("files", &cfg(Some(65534), None), &root_no_kill).unwrap_err().contains("without CAP_KILL"));
        // Its own user, or only another group, needs no CAP_KILL: its processes are its own uid's.
        assert_eq!(check_run_as("files", &cfg(Some(65534), None), &no_kill), Ok(vec![]));
        assert_eq!(check_run_as("files", &cfg(None, Some(1000)), &no_kill), Ok(vec![]));
    }

    #[test]
    fn capabilities_sluice_was_started_with_for_its_children_are_named_in_a_warning() {
        let given = Credentials { inherited: vec!["CAP_SETGID".into(), "CAP_SETUID".into()], ..creds(65534, true, &[]) };
        let w = check_run_as("files", &cfg(Some(1000), None), &given).expect("allowed");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("upstream 'files': Sluice was started with capabilities") && w[0].contains("(CAP_SETGID, CAP_SETUID,"), "{w:?}");
        assert!(w[0].contains("cleared them and set no_new_privs"), "{w:?}");
    }
}
