use super::*;
use crate::state::Key;

fn limits(
    max: usize,
    per_principal: usize,
    subscriptions: usize,
    idle: Duration,
) -> crate::config::Bridge {
    let mut b = crate::config::Config::from_toml("", "t", &Default::default())
        .expect("default config")
        .bridge;
    b.max_client_sessions = max;
    b.max_client_sessions_per_principal = per_principal;
    b.max_subscriptions_per_session = subscriptions;
    b.client_session_idle = idle;
    b
}

fn open(s: &Sessions, principal: &str) -> Arc<LegacySession> {
    s.create(principal, "2025-11-25", Map::new(), Value::Null)
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn session_ids_are_visible_ascii_and_bound_to_their_principal() {
    let s = Sessions::new(&limits(10, 10, 8, Duration::from_secs(60)), Keys::random());
    let a = open(&s, "alice");
    assert!(a.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    assert!(s.get(&a.id, "alice").is_some());
    assert!(s.get(&a.id, "bob").is_none(), "another principal's id");
    // Flip one character of the tag (not the last one, whose low bits are padding).
    let mut forged: Vec<char> = a.id.chars().collect();
    let i = forged.len() - 5;
    forged[i] = if forged[i] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    assert_ne!(forged, a.id);
    assert!(s.get(&forged, "alice").is_none());
    assert!(s.remove(&a.id));
    assert!(s.get(&a.id, "alice").is_none(), "ended");
}

#[test]
fn a_thousand_initializes_by_one_principal_leave_another_principals_session() {
    let s = Sessions::new(&limits(1000, 16, 8, HOUR), Keys::random());
    let bob = open(&s, "bob");
    let alice: Vec<_> = (0..1000).map(|_| open(&s, "alice")).collect();
    assert!(s.get(&bob.id, "bob").is_some(), "bob's session survived");
    assert_eq!(s.len(), 17, "alice holds her 16, bob his one");
    assert!(
        alice[..984].iter().all(|a| s.get(&a.id, "alice").is_none()),
        "alice's oldest went"
    );
    assert!(alice[984..].iter().all(|a| s.get(&a.id, "alice").is_some()));
}

#[test]
fn the_cap_per_principal_evicts_that_principals_least_recently_used() {
    let s = Sessions::new(&limits(100, 2, 8, HOUR), Keys::random());
    let (a1, a2) = (open(&s, "alice"), open(&s, "alice"));
    assert!(
        s.get(&a1.id, "alice").is_some(),
        "a1 used: a2 is now the oldest"
    );
    let a3 = open(&s, "alice");
    assert!(s.get(&a2.id, "alice").is_none());
    assert!(s.get(&a1.id, "alice").is_some() && s.get(&a3.id, "alice").is_some());
}

#[test]
fn the_global_cap_evicts_the_least_recently_used_of_all() {
    let s = Sessions::new(&limits(2, 2, 8, HOUR), Keys::random());
    let (a, b) = (open(&s, "alice"), open(&s, "bob"));
    assert!(s.get(&a.id, "alice").is_some());
    let c = open(&s, "carol");
    assert!(
        s.get(&b.id, "bob").is_none(),
        "bob's was the least recently used"
    );
    assert!(s.get(&a.id, "alice").is_some() && s.get(&c.id, "carol").is_some());
    assert_eq!(s.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_on_get_and_before_an_eviction() {
    let s = Sessions::new(&limits(10, 10, 8, Duration::from_secs(60)), Keys::random());
    let (old, kept) = (open(&s, "p"), open(&s, "q"));
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(s.get(&kept.id, "q").is_some(), "used just in time");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(s.len(), 2, "expiry is lazy");
    let _new = open(&s, "r");
    assert_eq!(s.len(), 2, "the expired one went when another was created");
    assert!(s.get(&old.id, "p").is_none());
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(s.get(&kept.id, "q").is_none(), "expired on get");
}

#[test]
fn subscriptions_are_a_set_capped_per_session() {
    let s = Sessions::new(&limits(10, 10, 2, HOUR), Keys::random());
    let a = open(&s, "alice");
    assert!(a.subscribe("mock://1").is_ok() && a.subscribe("mock://2").is_ok());
    assert!(a.subscribe("mock://1").is_ok(), "held already");
    let err = a.subscribe("mock://3").unwrap_err();
    assert_eq!(err, TooManySubscriptions(2));
    assert!(
        err.to_string()
            .contains("bridge.max_subscriptions_per_session"),
        "{err}"
    );
    a.unsubscribe("mock://1");
    assert!(a.subscribe("mock://3").is_ok());
    assert!(a.is_subscribed("mock://3") && !a.is_subscribed("mock://1"));
    assert_eq!(a.subscriptions().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_request_to_the_client_is_forgotten_when_its_wait_times_out() {
    let s = Sessions::new(&limits(10, 10, 8, HOUR), Keys::random());
    let a = open(&s, "alice");
    let waited = tokio::time::timeout(Duration::from_secs(5), a.expect("\"sluice-1\"")).await;
    assert!(waited.is_err(), "no answer");
    assert!(
        a.pending.lock().unwrap().is_empty(),
        "the timed-out request is gone"
    );
    assert!(
        !a.deliver("\"sluice-1\"", Value::Null),
        "a late answer finds nothing"
    );
    let answered = a.expect("\"sluice-2\"");
    assert!(a.deliver("\"sluice-2\"", Value::Bool(true)));
    assert_eq!(answered.await.unwrap(), Value::Bool(true));
    assert!(a.pending.lock().unwrap().is_empty());
}

#[test]
fn ids_are_tagged_with_the_state_keys_so_replicas_sharing_them_accept_each_others() {
    let key = |id: u8, fill: u8| Key::new(id, vec![fill; 32]).expect("a 32-byte key");
    let ring = |ks: Vec<Key>| Keys::new(ks).expect("a key ring");
    let cfg = limits(10, 10, 8, HOUR);
    let a = Sessions::new(&cfg, ring(vec![key(1, 7)]));
    let id = open(&a, "alice").id.clone();
    assert!(id.starts_with("s2."), "{id}");
    // Another replica with the same keys: the id is genuine there, for alice only.
    let b = Sessions::new(&cfg, ring(vec![key(1, 7)]));
    assert!(b.genuine(&id, "alice"));
    assert!(!b.genuine(&id, "bob"), "bound to its principal");
    // A replica whose ring rotated (a new sealing key first, the old one still held) accepts
    // the old id and mints new ones under the new key.
    let rotated = Sessions::new(&cfg, ring(vec![key(2, 9), key(1, 7)]));
    assert!(rotated.genuine(&id, "alice"));
    let new_id = open(&rotated, "alice").id.clone();
    assert!(
        !a.genuine(&new_id, "alice"),
        "the old ring does not hold key 2"
    );
    // Other keys, or the old key dropped: not genuine.
    assert!(
        !Sessions::new(&cfg, ring(vec![key(1, 8)])).genuine(&id, "alice"),
        "same key id, another secret"
    );
    assert!(
        !Sessions::new(&cfg, ring(vec![key(2, 9)])).genuine(&id, "alice"),
        "key 1 retired"
    );
    // The key id byte is covered: moved to another id the tag no longer matches.
    let mut raw = URL_SAFE_NO_PAD.decode(&id[3..]).expect("base64url");
    raw[0] = 2;
    let moved = format!("s2.{}", URL_SAFE_NO_PAD.encode(raw));
    assert!(!rotated.genuine(&moved, "alice"));
    // The earlier form (s1., per-process key) is not an id any more.
    assert!(!a.genuine(&id.replacen("s2.", "s1.", 1), "alice"));
}

#[tokio::test(start_paused = true)]
async fn all_gives_only_the_sessions_not_idle_past_their_time() {
    let s = Sessions::new(&limits(10, 10, 8, Duration::from_secs(60)), Keys::random());
    let old = open(&s, "alice");
    tokio::time::advance(Duration::from_secs(61)).await;
    let new = open(&s, "alice");
    let ids: Vec<String> = s.all().iter().map(|x| x.id.clone()).collect();
    assert_eq!(
        ids,
        vec![new.id.clone()],
        "the idle-expired one is not given (it would be written back)"
    );
    assert_ne!(old.id, new.id);
}
