use std::time::Duration;

use super::*;

fn key(principal: &str, caps: Bridged) -> Key {
    Key {
        principal: principal.into(),
        upstream: "up".into(),
        instance: 1,
        caps,
    }
}

const CAPS: Caps = Caps {
    max: 4,
    per_principal: 2,
    per_upstream: None,
};
const SAMPLING: Bridged = Bridged {
    sampling: true,
    sampling_tools: false,
    elicitation_form: false,
    elicitation_url: false,
    roots: false,
};

/// Opens a session for `principal` (reserving, then returning it idle); gives what was closed.
fn open_idle(
    slots: &mut Slots<&'static str>,
    principal: &str,
    name: &'static str,
    now: Instant,
) -> Option<&'static str> {
    let closed = slots.reserve(principal, 1, false, CAPS).expect("room");
    slots.put(key(principal, SAMPLING), name, now);
    closed
}

#[test]
fn an_idle_session_is_reused_only_for_its_own_key() {
    let mut s = Slots::default();
    let now = Instant::now();
    open_idle(&mut s, "alice", "a1", now);
    assert_eq!(
        s.take(&key("alice", Bridged::default())),
        None,
        "other capabilities"
    );
    assert_eq!(s.take(&key("bob", SAMPLING)), None, "another principal");
    assert_eq!(s.take(&key("alice", SAMPLING)), Some("a1"));
    assert_eq!(s.take(&key("alice", SAMPLING)), None, "leased now");
    assert_eq!(s.open(), 1);
}

#[test]
fn a_principal_at_its_cap_closes_its_own_oldest_idle_session_else_is_refused() {
    let mut s = Slots::default();
    let now = Instant::now();
    open_idle(&mut s, "bob", "b1", now);
    open_idle(&mut s, "alice", "a1", now);
    open_idle(&mut s, "alice", "a2", now);
    assert_eq!(
        s.reserve("alice", 1, false, CAPS),
        Ok(Some("a1")),
        "her own oldest, not bob's"
    );
    assert_eq!(s.open(), 3);
    assert_eq!(s.take(&key("alice", SAMPLING)), Some("a2"));
    assert_eq!(
        s.reserve("alice", 1, false, CAPS),
        Err(Refused::Principal(2)),
        "both leased"
    );
    let msg = Refused::Principal(2).full("up", 8).to_string();
    assert!(
        msg.contains("sessions with 2025-11-25 upstreams")
            && msg.contains("bridge.max_sessions_per_principal = 2"),
        "{msg}"
    );
    assert_eq!(
        s.take(&key("bob", SAMPLING)),
        Some("b1"),
        "bob's session was never touched"
    );
}

#[test]
fn the_internal_principal_is_exempt_from_the_cap_per_principal_but_not_the_global_one() {
    let mut s: Slots<&'static str> = Slots::default();
    for _ in 0..4 {
        assert_eq!(s.reserve("sluice-internal", 1, true, CAPS), Ok(None));
    }
    assert_eq!(
        s.reserve("sluice-internal", 1, true, CAPS),
        Err(Refused::Global(4))
    );
}

#[test]
fn at_the_global_cap_the_least_recently_returned_idle_session_is_closed() {
    let mut s = Slots::default();
    let t0 = Instant::now();
    open_idle(&mut s, "a", "a1", t0);
    open_idle(&mut s, "b", "b1", t0 + Duration::from_secs(1));
    open_idle(&mut s, "c", "c1", t0 + Duration::from_secs(2));
    open_idle(&mut s, "a", "a2", t0 + Duration::from_secs(3));
    assert_eq!(s.reserve("d", 1, false, CAPS), Ok(Some("a1")));
    for k in ["b", "c", "a"] {
        assert!(s.take(&key(k, SAMPLING)).is_some());
    }
    assert_eq!(
        s.reserve("d", 1, false, CAPS),
        Err(Refused::Global(4)),
        "everything is leased"
    );
    s.release("d", 1);
    assert_eq!(
        s.reserve("e", 1, false, CAPS),
        Ok(None),
        "a released slot is free again"
    );
}

#[test]
fn idle_sessions_past_their_deadline_expire_first_deadline_first() {
    let mut s = Slots::default();
    let t0 = Instant::now();
    open_idle(&mut s, "a", "old", t0);
    open_idle(&mut s, "a", "new", t0 + Duration::from_secs(10));
    assert_eq!(s.expire(Some(t0 + Duration::from_secs(5))), vec!["old"]);
    assert_eq!(s.open(), 1);
    assert_eq!(s.expire(None), vec!["new"]);
    assert_eq!(s.open(), 0);
    assert!(
        s.held.is_empty() && s.by_key.is_empty(),
        "nothing left behind"
    );
}

/// A stdio upstream's share: two processes per principal of upstream instance 1.
const SHARE: Caps = Caps {
    max: 8,
    per_principal: 4,
    per_upstream: Some(2),
};

fn stdio_key(principal: &str, instance: u64) -> Key {
    Key {
        principal: principal.into(),
        upstream: format!("up{instance}"),
        instance,
        caps: SAMPLING,
    }
}

#[test]
fn a_principal_holding_its_share_of_a_stdio_upstream_closes_its_own_idle_one_of_it_else_is_refused_and_others_are_not(
) {
    let mut s = Slots::default();
    let now = Instant::now();
    // Alice: one idle session of another upstream, two of instance 1, both leased.
    assert_eq!(s.reserve("alice", 2, false, SHARE), Ok(None));
    s.put(stdio_key("alice", 2), "a-other", now);
    for _ in 0..2 {
        assert_eq!(s.reserve("alice", 1, false, SHARE), Ok(None));
    }
    assert_eq!(
        s.reserve("alice", 1, false, SHARE),
        Err(Refused::Share(2)),
        "her idle session of another upstream is not closed for it"
    );
    let msg = Refused::Share(2).full("files", 8).to_string();
    assert!(
        msg.contains("stdio upstream \"files\"") && msg.contains("max_processes_per_principal = 2"),
        "{msg}"
    );
    // Bob is not touched by her share.
    assert_eq!(s.reserve("bob", 1, false, SHARE), Ok(None));
    // One of hers comes back idle: it is closed for her next one (she stays at two).
    s.put(stdio_key("alice", 1), "a1", now);
    assert_eq!(s.reserve("alice", 1, false, SHARE), Ok(Some("a1")));
    assert_eq!(s.reserve("alice", 1, false, SHARE), Err(Refused::Share(2)));
    // A released one frees her share.
    s.release("alice", 1);
    assert_eq!(s.reserve("alice", 1, false, SHARE), Ok(None));
    // Sluice's internal principal has no share.
    for _ in 0..3 {
        assert_eq!(s.reserve("sluice-internal", 1, true, SHARE), Ok(None));
    }
}

#[test]
fn a_session_returned_later_with_a_shorter_idle_time_expires_first() {
    let mut s = Slots::default();
    let t0 = Instant::now();
    // An HTTP session returned first, idle 300 s; a stdio process returned after it, idle 1 s.
    open_idle(&mut s, "a", "http", t0 + Duration::from_secs(300));
    open_idle(&mut s, "b", "stdio", t0 + Duration::from_secs(2));
    assert_eq!(s.expire(Some(t0 + Duration::from_secs(2))), vec!["stdio"]);
    assert_eq!(
        s.expire(Some(t0 + Duration::from_secs(299))),
        Vec::<&str>::new()
    );
    assert_eq!(
        s.take(&key("a", SAMPLING)),
        Some("http"),
        "still idle, leased again"
    );
    assert!(s.by_deadline.is_empty(), "a leased session has no deadline");
}
