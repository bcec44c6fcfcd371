use super::*;
use proptest::prelude::*;

fn sample() -> Sealed {
    Sealed {
        principal: "alice".into(),
        method: "tools/call".into(),
        name: "x".into(),
        digest: "d".into(),
        upstream: "u".into(),
        round: 1,
        expires_ms: 10_000,
        owner: "r1".into(),
        handle: Some("h".into()),
        kind: None,
        extra: None,
        declined: Vec::new(),
        pending: None,
    }
}

fn keys() -> Keys {
    Keys::new(vec![Key::new(7, vec![1; 32]).unwrap()]).unwrap()
}

#[test]
fn a_sealed_state_opens_for_its_own_request_only() {
    let k = keys();
    let t = k.seal(&sample());
    assert_eq!(k.open(&t, "alice", "tools/call", "x", "d", 5).unwrap(), sample());
    assert_eq!(k.open(&t, "bob", "tools/call", "x", "d", 5), Err(StateError::WrongPrincipal));
    assert_eq!(k.open(&t, "alice", "tools/call", "x", "other", 5), Err(StateError::RequestChanged));
    assert_eq!(k.open(&t, "alice", "tools/call", "x", "d", 10_000), Err(StateError::Expired));
}

#[test]
fn a_state_sealed_with_another_key_or_altered_is_tampered() {
    let other = Keys::new(vec![Key::new(7, vec![2; 32]).unwrap()]).unwrap();
    let t = other.seal(&sample());
    assert_eq!(keys().open(&t, "alice", "tools/call", "x", "d", 5), Err(StateError::Tampered));
    assert_eq!(keys().open("", "alice", "tools/call", "x", "d", 5), Err(StateError::Tampered));
    assert_eq!(keys().open("AAAA====", "alice", "tools/call", "x", "d", 5), Err(StateError::Tampered));
}

#[test]
fn rotation_opens_states_sealed_with_an_older_key() {
    let old = Keys::new(vec![Key::new(1, vec![1; 32]).unwrap()]).unwrap();
    let t = old.seal(&sample());
    let ring = Keys::new(vec![Key::new(2, vec![2; 32]).unwrap(), Key::new(1, vec![1; 32]).unwrap()]).unwrap();
    assert!(ring.open(&t, "alice", "tools/call", "x", "d", 5).is_ok());
}

#[test]
fn the_params_digest_ignores_meta_and_key_order_but_not_values() {
    let a = params_digest([("name", "\"x\""), ("arguments", "{\"a\":1,\"b\":2}"), ("_meta", "{}")].into_iter());
    let b = params_digest([("arguments", "{\"b\":2,\"a\":1}"), ("name", "\"x\""), ("requestState", "\"s\"")].into_iter());
    let c = params_digest([("arguments", "{\"b\":3,\"a\":1}"), ("name", "\"x\"")].into_iter());
    assert_eq!(a, b);
    assert_ne!(a, c);
}

proptest! {
    #[test]
    fn seal_then_open_round_trips(p in "[a-z]{1,12}", name in "\\PC{0,40}", round in 1u32..100) {
        let k = keys();
        let s = Sealed { principal: p.clone(), name: name.clone(), round, ..sample() };
        let t = k.seal(&s);
        prop_assert_eq!(k.open(&t, &p, "tools/call", &name, "d", 5).unwrap(), s);
    }
}

#[test]
fn ten_thousand_random_mutations_of_a_valid_state_are_all_refused() {
    use rand::{Rng, SeedableRng};
    let k = keys();
    let t = k.seal(&sample());
    let alphabet: Vec<char> = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/".chars().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut tried = 0;
    while tried < 10_000 {
        let mut chars: Vec<char> = t.chars().collect();
        match rng.random_range(0..3) {
            0 => {
                let i = rng.random_range(0..chars.len());
                chars[i] = alphabet[rng.random_range(0..alphabet.len())];
            }
            1 => {
                let i = rng.random_range(0..=chars.len());
                chars.insert(i, alphabet[rng.random_range(0..alphabet.len())]);
            }
            _ => {
                let i = rng.random_range(0..chars.len());
                chars.remove(i);
            }
        }
        let m: String = chars.into_iter().collect();
        if m == t {
            continue;
        }
        tried += 1;
        assert!(k.open(&m, "alice", "tools/call", "x", "d", 5).is_err(), "mutation accepted: {m}");
    }
}
