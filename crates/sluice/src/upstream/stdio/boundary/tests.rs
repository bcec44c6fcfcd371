use super::capabilities::{self, CAP_KILL, CAP_NET_BIND_SERVICE, CAP_SETGID, CAP_SETUID};
use super::*;
use crate::config::{RunGroup, RunUser};

fn creds(uid: u32, caps: bool, groups: &[u32]) -> Credentials {
    let effective = if caps {
        CAP_SETUID | CAP_SETGID | CAP_KILL
    } else {
        0
    };
    Credentials {
        uid,
        euid: uid,
        gid: uid,
        egid: uid,
        groups: groups.to_vec(),
        cap_setuid: caps,
        cap_setgid: caps,
        cap_kill: caps,
        effective,
    }
}

fn cfg(user: Option<u32>, group: Option<u32>) -> StdioConfig {
    let mut c = super::super::tests::config("true", 1, 0);
    c.user = user.map(|uid| RunUser {
        written: uid.to_string(),
        uid,
        gid: Some(uid),
        account: None,
    });
    c.group = group.map(|gid| RunGroup {
        written: gid.to_string(),
        gid,
    });
    c
}

#[test]
fn a_user_or_group_sluice_cannot_switch_to_is_refused_saying_what_is_missing() {
    let nobody = creds(65534, false, &[]);
    let e = check_run_as("files", &cfg(Some(0), None), &nobody).unwrap_err();
    assert!(
        e.contains("upstream 'files'")
            && e.contains("uid 0")
            && e.contains("without CAP_SETUID and CAP_SETGID"),
        "{e}"
    );
    let e = check_run_as("files", &cfg(None, Some(0)), &nobody).unwrap_err();
    assert!(
        e.contains("group = \"0\"") && e.contains("without CAP_SETGID"),
        "{e}"
    );
    // Its own ids need no switch.
    assert_eq!(
        check_run_as("files", &cfg(Some(65534), Some(65534)), &nobody),
        Ok(None)
    );
    // A non-root Sluice with the capabilities, but groups the child would keep.
    let e = check_run_as("files", &cfg(Some(1000), None), &creds(65534, true, &[27])).unwrap_err();
    assert!(
        e.contains("supplementary groups [27]") && e.contains("--clear-groups"),
        "{e}"
    );
    assert_eq!(
        check_run_as("files", &cfg(Some(1000), None), &creds(65534, true, &[])),
        Ok(None)
    );
}

#[test]
fn root_may_switch_and_is_warned_of_a_server_left_running_as_root() {
    let root = creds(0, true, &[0]);
    assert_eq!(
        check_run_as("files", &cfg(Some(65534), None), &root),
        Ok(None)
    );
    for left_as_root in [cfg(None, None), cfg(None, Some(65534)), cfg(Some(0), None)] {
        let w = check_run_as("files", &left_as_root, &root)
            .expect("allowed")
            .expect("a warning");
        assert!(
            w.contains("upstream 'files': its processes run as root") && w.contains("set user"),
            "{w}"
        );
    }
    // Without the capabilities, root is refused like anyone (a container's dropped caps).
    assert!(check_run_as("files", &cfg(Some(65534), None), &creds(0, false, &[])).is_err());
}

#[test]
fn a_user_switch_without_cap_kill_is_refused_as_sluice_could_not_end_what_it_starts() {
    // setpriv --reuid nobody --inh-caps +setuid,+setgid --ambient-caps +setuid,+setgid: no CAP_KILL.
    let no_kill = Credentials {
        cap_kill: false,
        ..creds(65534, true, &[])
    };
    let e = check_run_as("files", &cfg(Some(1000), None), &no_kill).unwrap_err();
    assert!(
        e.contains("upstream 'files': user = \"1000\" (uid 1000)")
            && e.contains("without CAP_KILL"),
        "{e}"
    );
    assert!(
        e.contains("--ambient-caps +kill") && e.contains("or remove user"),
        "{e}"
    );
    // A root Sluice whose CAP_KILL was dropped (a container's --cap-drop) cannot either.
    let root_no_kill = Credentials {
        cap_kill: false,
        ..creds(0, true, &[0])
    };
    assert!(
        check_run_as("files", &cfg(Some(65534), None), &root_no_kill)
            .unwrap_err()
            .contains("without CAP_KILL")
    );
    // Its own user, or only another group, needs no CAP_KILL: its processes are its own uid's.
    assert_eq!(
        check_run_as("files", &cfg(Some(65534), None), &no_kill),
        Ok(None)
    );
    assert_eq!(
        check_run_as("files", &cfg(None, Some(1000)), &no_kill),
        Ok(None)
    );
}

/// A config with one stdio upstream `cfg` and `listen`.
fn config(stdio: StdioConfig, listen: &str) -> crate::config::Config {
    let over = crate::config::Overrides {
        listen: Some(listen.into()),
        upstreams: vec!["files=stdio:true".into()],
        ..Default::default()
    };
    let mut c = crate::config::Config::load(None, &over).expect("a config");
    c.upstreams[0].stdio = Some(stdio);
    c
}

#[test]
fn a_config_needs_setuid_setgid_and_kill_for_another_user_setgid_for_another_group_and_net_bind_below_1024(
) {
    let me = creds(65534, true, &[]);
    assert_eq!(
        capabilities::needed(&config(cfg(None, None), "127.0.0.1:8080"), &me),
        0
    );
    assert_eq!(
        capabilities::needed(&config(cfg(Some(65534), None), "127.0.0.1:8080"), &me),
        0,
        "its own user"
    );
    assert_eq!(
        capabilities::needed(&config(cfg(Some(1000), None), "127.0.0.1:8080"), &me),
        CAP_SETUID | CAP_SETGID | CAP_KILL
    );
    assert_eq!(
        capabilities::needed(&config(cfg(None, Some(1000)), "127.0.0.1:8080"), &me),
        CAP_SETGID
    );
    assert_eq!(
        capabilities::needed(&config(cfg(None, None), "127.0.0.1:443"), &me),
        CAP_NET_BIND_SERVICE
    );
}

#[test]
fn capabilities_held_beyond_what_the_config_needs_and_those_cleared_at_startup_are_named_in_one_warning(
) {
    assert_eq!(
        capabilities::warning(
            CAP_SETUID | CAP_SETGID | CAP_KILL,
            CAP_SETUID | CAP_SETGID | CAP_KILL,
            0
        ),
        None
    );
    assert_eq!(
        capabilities::warning(0, CAP_SETUID, 0),
        None,
        "lacking one is check_run_as's business"
    );
    let sys_admin = 1u64 << 21;
    let w = capabilities::warning(CAP_KILL | sys_admin, 0, 0).expect("a warning");
    assert!(
        w.contains("does not need: CAP_KILL, CAP_SYS_ADMIN;") && w.contains("(here none:"),
        "{w}"
    );
    let w = capabilities::warning(
        CAP_SETUID | CAP_SETGID | CAP_KILL,
        CAP_SETUID | CAP_SETGID | CAP_KILL,
        CAP_SETUID | CAP_SETGID,
    )
    .expect("a warning");
    assert!(
        w.starts_with(
            "Sluice was started with CAP_SETGID, CAP_SETUID in its ambient or inheritable set"
        ),
        "{w}"
    );
    assert!(
        w.contains("cleared them and set no_new_privs") && !w.contains("does not need"),
        "{w}"
    );
    // Root's forty-odd are summed up past the eighth.
    let w = capabilities::warning(u64::MAX >> 23, 0, 0).expect("a warning");
    assert!(
        w.contains("CAP_CHOWN, CAP_DAC_OVERRIDE") && w.contains("and 33 more"),
        "{w}"
    );
}
