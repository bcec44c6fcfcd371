//! Unit tests of `stdio/mod.rs`: back-off, the process bound and spares.

use super::*;

fn spec(program: &str) -> Spec {
    spec_with(program, 1, 0)
}

/// `program` with no argument, run as Sluice, stderr dropped.
pub(super) fn config(program: &str, max_processes: usize, spare_processes: usize) -> StdioConfig {
    StdioConfig {
        command: vec![program.to_owned()],
        env: Vec::new(),
        inherit_env: true,
        inherit: Vec::new(),
        secret_env: Vec::new(),
        idle: Duration::from_secs(60),
        cwd: None,
        stderr: crate::config::Stderr::Drop,
        stderr_max_bytes: 1 << 20,
        max_processes,
        max_processes_per_principal: max_processes,
        spare_processes,
        start: Duration::from_secs(5),
        user: None,
        group: None,
    }
}

fn spec_with(program: &str, max_processes: usize, spare_processes: usize) -> Spec {
    Spec::new(
        "nope",
        config(program, max_processes, spare_processes),
        1 << 20,
        Duration::from_secs(5),
        Duration::from_secs(2),
    )
}

#[test]
fn preflight_refuses_a_stderr_path_that_is_a_symlink_naming_what_to_do() {
    let d = std::env::temp_dir().join(format!("sluice-preflight-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a scratch directory");
    let mut c = config("true", 1, 0);
    c.stderr = crate::config::Stderr::File(d.join("server.log"));
    assert_eq!(
        preflight("up", &c),
        Ok(()),
        "no file yet: Sluice creates it"
    );
    std::os::unix::fs::symlink(d.join("victim"), d.join("server.log")).expect("a symlink");
    let e = preflight("up", &c).expect_err("a symlink at the stderr path");
    assert!(
        e.contains("upstream 'up'") && e.contains("symbolic link") && e.contains("remove it"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[tokio::test(start_paused = true)]
async fn a_failed_start_backs_off_doubling_and_says_when_it_tries_again() {
    let s = spec("/nonexistent/sluice-test-server");
    let grace = Duration::from_secs(1);
    let first = s
        .start(s.slot().expect("a slot"), grace)
        .err()
        .expect("no such program")
        .to_string();
    assert!(
        first.contains("upstream 'nope' could not be started")
            && first.contains("check its command"),
        "{first}"
    );
    let waiting = s
        .start(s.slot().expect("the slot is free again"), grace)
        .err()
        .expect("backing off")
        .to_string();
    assert!(waiting.contains("next start is in 100 ms"), "{waiting}");
    tokio::time::advance(BACKOFF_FIRST).await;
    assert!(s
        .start(s.slot().expect("slot"), grace)
        .err()
        .expect("still no program")
        .to_string()
        .contains("could not be started"));
    let waiting = s
        .start(s.slot().expect("slot"), grace)
        .err()
        .expect("backing off")
        .to_string();
    assert!(waiting.contains("next start is in 200 ms"), "{waiting}");
    s.succeeded();
    assert!(s
        .start(s.slot().expect("slot"), grace)
        .err()
        .expect("no program")
        .to_string()
        .contains("could not be started"));
}

#[tokio::test]
async fn a_process_holds_its_place_until_it_exits_and_end_all_waits_for_it() {
    let s = spec("cat");
    let (proc, _lines) = s
        .start(s.slot().expect("a slot"), Duration::from_secs(2))
        .expect("cat starts");
    assert!(s.slot().is_none(), "max_processes = 1 is taken");
    assert_eq!(s.running(), 1);
    s.end_all().await;
    assert!(proc.is_done());
    assert_eq!(s.running(), 0);
    assert!(
        s.slot().is_some(),
        "the place is free once the process exited"
    );
    assert!(
        proc.exit_error().to_string().contains("status 0"),
        "cat exits on end of input: {}",
        proc.exit_error()
    );
}

#[tokio::test]
async fn spares_are_started_ahead_within_max_processes_and_taken_first() {
    let s = spec_with("cat", 2, 1);
    let grace = Duration::from_secs(2);
    let (first, _l1) = s
        .start(s.slot().expect("a slot"), grace)
        .expect("cat starts");
    assert_eq!(s.running(), 2, "the process and one warm spare");
    let (spare, _l2) = s.take_spare(grace).expect("the spare");
    assert_ne!(spare.pid, first.pid);
    assert_eq!(
        s.running(),
        2,
        "no room for another spare under max_processes = 2"
    );
    assert!(s.take_spare(grace).is_none());
    first.end("test");
    first.ended().await;
    // A freed place waits for the next start: a spare there would take a caller's place.
    assert!(s.take_spare(grace).is_none());
    assert_eq!(s.running(), 1, "no spare started into the freed place");
    spare.end("test");
    spare.ended().await;
    let (_again, _l3) = s
        .start(s.slot().expect("a free place"), grace)
        .expect("cat starts");
    assert_eq!(
        s.running(),
        2,
        "a start refills the spares within max_processes"
    );
    assert!(s.take_spare(grace).is_some());
    s.end_all().await;
    assert_eq!(s.running(), 0);
}
