use std::sync::Arc;

use serde_json::{json, Value};

use super::*;

fn registry() -> Arc<Registry> {
    registry_telling().0
}

/// A registry and what it tells.
fn registry_telling() -> (Arc<Registry>, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let announce: Announce = Box::new(move |v| {
        let _ = tx.send(v);
    });
    let reg = Registry::new(announce, Arc::new(crate::metrics::Metrics::new()), None);
    (reg, rx)
}

fn held(principal: &str, approvers: &[&str]) -> Held {
    let (argument_keys, shown) = describe(
        Some(r#"{"ticket_id":"T-1","secret":"canary-value"}"#),
        &["ticket_id".to_owned()],
    );
    Held {
        id: String::new(),
        method: "tools/call".into(),
        tool: "delete".into(),
        upstream: "u".into(),
        principal: principal.into(),
        argument_keys,
        shown,
        held_at_ms: 1,
        expires_at_ms: 2,
        replica: "r1".into(),
        rule: "ops".into(),
        approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
        digest: "d".into(),
    }
}

const LIMITS: Limits = Limits {
    total: 3,
    per_principal: 2,
};

#[test]
fn keys_are_listed_and_only_shown_values_are_kept() {
    let h = held("p", &[]);
    assert_eq!(h.argument_keys, vec!["secret", "ticket_id"]);
    assert_eq!(
        serde_json::Value::Object(h.shown.clone()),
        json!({"ticket_id": "T-1"})
    );
    let big = format!(r#"{{"ticket_id":"{}"}}"#, "x".repeat(2000));
    let (_, shown) = describe(Some(&big), &["ticket_id".to_owned()]);
    assert!(shown["ticket_id"].as_str().unwrap().contains("not shown"));
}

#[tokio::test]
async fn a_decision_is_single_use_and_reaches_the_held_call() {
    let (reg, mut events) = registry_telling();
    let t = reg.hold(held("p", &[]), LIMITS).unwrap();
    assert_eq!(t.held.id.len(), 32);
    assert_eq!(reg.list().len(), 1);
    let v = reg.decide(&t.held.id, true, "alice").await.unwrap();
    assert_eq!(
        (v.approved, v.operator.as_str(), v.digest.as_str()),
        (true, "alice", "d")
    );
    assert_eq!(
        reg.decide(&t.held.id, false, "bob").await,
        Err(DecideError::AlreadyDecided)
    );
    assert_eq!(
        reg.decide("nope", true, "bob").await,
        Err(DecideError::NotFound)
    );
    assert!(reg.list().is_empty(), "a decided call is no longer listed");
    let mut t = t;
    let got = (&mut t.rx).await.unwrap();
    assert!(got.approved);
    let states: Vec<String> = [events.recv().await.unwrap(), events.recv().await.unwrap()]
        .iter()
        .map(|e| e["state"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(states, ["held", "approved"]);
}

#[tokio::test]
async fn holds_past_the_caps_are_refused_and_a_dropped_ticket_is_withdrawn() {
    let reg = registry();
    let a = reg.hold(held("p", &[]), LIMITS).unwrap();
    let _b = reg.hold(held("p", &[]), LIMITS).unwrap();
    assert!(matches!(
        reg.hold(held("p", &[]), LIMITS),
        Err(crate::policy::Refusal::HeldCap {
            per_principal: true,
            limit: 2
        })
    ));
    let _c = reg.hold(held("q", &[]), LIMITS).unwrap();
    assert!(matches!(
        reg.hold(held("r", &[]), LIMITS),
        Err(crate::policy::Refusal::HeldCap {
            per_principal: false,
            limit: 3
        })
    ));
    let id = a.held.id.clone();
    drop(a);
    assert_eq!(reg.decide(&id, true, "x").await, Err(DecideError::NotFound));
    assert!(reg.hold(held("r", &[]), LIMITS).is_ok());
}

#[tokio::test]
async fn only_a_named_approver_decides() {
    let reg = registry();
    let t = reg.hold(held("p", &["alice"]), LIMITS).unwrap();
    assert_eq!(
        reg.decide(&t.held.id, true, "mallory").await,
        Err(DecideError::NotAnApprover)
    );
    assert!(reg.decide(&t.held.id, false, "alice").await.is_ok());
}
