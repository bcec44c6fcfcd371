use std::time::{Duration, Instant};

use super::*;
use crate::config::{LoopBreaker, LoopOverride};

fn call<'a>(principal: &'a str, tool: &'a str, args: &'a str) -> Call<'a> {
    Call {
        principal,
        groups: &[],
        upstream: "up",
        tool,
        arguments: Some(args),
    }
}

fn breaker(max: u32) -> Loops {
    Loops::new(&LoopBreaker {
        max_identical_calls: max,
        window: Duration::from_secs(60),
        overrides: vec![LoopOverride {
            principal: vec![],
            group: vec![],
            upstream: vec![],
            tool: vec!["poll_*".into()],
            max_identical_calls: 0,
        }],
    })
}

fn charge(l: &Loops, c: &Call<'_>, at: Instant) -> Result<(), Refusal> {
    let (max, _) = l.limit(c);
    let d = digest(c.upstream, c.tool, c.arguments);
    l.charge_at(c, d, max, at)
}

#[test]
fn the_same_arguments_in_another_order_or_spacing_are_the_same_call() {
    let a = digest("up", "t", Some(r#"{"b":[1,{"y":2,"x":1}],"a":"s"}"#));
    let b = digest(
        "up",
        "t",
        Some(r#" { "a" : "s", "b" : [ 1, {"x":1,"y":2} ] } "#),
    );
    assert_eq!(a, b);
    assert_ne!(
        a,
        digest("up", "t", Some(r#"{"a":"s","b":[{"x":1,"y":2},1]}"#))
    );
    assert_ne!(
        a,
        digest("up", "t2", Some(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#))
    );
    // Length-prefixed: the upstream and tool cannot spell each other.
    assert_ne!(digest("ab", "c", None), digest("a", "bc", None));
    assert_ne!(digest("up", "t", None), digest("up", "t", Some("{}")));
}

#[test]
fn the_limit_then_one_each_interval_then_refused_with_when_to_retry() {
    let l = breaker(3);
    let t0 = Instant::now();
    let c = call("alice", "search", r#"{"q":"x"}"#);
    for _ in 0..3 {
        charge(&l, &c, t0).unwrap();
    }
    let Err(Refusal::Repeated {
        limit,
        retry_after_ms,
        window_ms,
        ..
    }) = charge(&l, &c, t0)
    else {
        panic!("the fourth identical call is refused");
    };
    assert_eq!((limit, window_ms), (3, 60_000));
    assert_eq!(retry_after_ms, 20_000, "one interval: window / limit");
    // Other arguments, another principal, another tool: counted apart.
    charge(&l, &call("alice", "search", r#"{"q":"y"}"#), t0).unwrap();
    charge(&l, &call("bob", "search", r#"{"q":"x"}"#), t0).unwrap();
    charge(&l, &call("alice", "fetch", r#"{"q":"x"}"#), t0).unwrap();
    // One interval later, one more.
    let later = t0 + Duration::from_secs(20);
    charge(&l, &c, later).unwrap();
    assert!(charge(&l, &c, later).is_err());
}

#[test]
fn a_loop_over_a_few_argument_sets_is_caught_and_an_override_of_zero_is_off() {
    let l = breaker(2);
    let t0 = Instant::now();
    let (a, b) = (r#"{"p":1}"#, r#"{"p":2}"#);
    for _ in 0..2 {
        charge(&l, &call("al", "t", a), t0).unwrap();
        charge(&l, &call("al", "t", b), t0).unwrap();
    }
    assert!(charge(&l, &call("al", "t", a), t0).is_err());
    assert!(charge(&l, &call("al", "t", b), t0).is_err());
    let c = call("al", "poll_status", a);
    assert_eq!(
        l.limit(&c).0,
        0,
        "the override turns it off for polling tools"
    );
}

#[test]
fn the_table_is_bounded_and_idle_pairs_are_forgotten() {
    let l = breaker(5);
    let t0 = Instant::now();
    let ring_args: Vec<String> = (0..RING + 3).map(|i| format!("{{\"i\":{i}}}")).collect();
    for a in &ring_args {
        charge(&l, &call("al", "t", a), t0).unwrap();
    }
    assert_eq!(l.tracked(), 1);
    let ring = l.table.lock().unwrap().values().next().unwrap().len();
    assert_eq!(ring, RING, "the ring keeps the last {RING} argument sets");
    l.retain_recent();
    assert_eq!(l.tracked(), 1, "due in the future: kept");
    l.table
        .lock()
        .unwrap()
        .values_mut()
        .for_each(|r| r.iter_mut().for_each(|s| s.due = t0));
    l.retain_recent();
    assert_eq!(l.tracked(), 0, "idle: forgotten");
}
