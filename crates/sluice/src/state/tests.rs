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
        kind: Kind::Bridge,
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
    assert_eq!(
        k.open(&t, "alice", "tools/call", "x", "d", 5).unwrap(),
        sample()
    );
    assert_eq!(
        k.open(&t, "bob", "tools/call", "x", "d", 5),
        Err(StateError::WrongPrincipal)
    );
    assert_eq!(
        k.open(&t, "alice", "tools/call", "x", "other", 5),
        Err(StateError::RequestChanged)
    );
    assert_eq!(
        k.open(&t, "alice", "tools/call", "x", "d", 10_000),
        Err(StateError::Expired)
    );
}

#[test]
fn a_state_sealed_with_another_key_or_altered_is_tampered() {
    let other = Keys::new(vec![Key::new(7, vec![2; 32]).unwrap()]).unwrap();
    let t = other.seal(&sample());
    assert_eq!(
        keys().open(&t, "alice", "tools/call", "x", "d", 5),
        Err(StateError::Tampered)
    );
    assert_eq!(
        keys().open("", "alice", "tools/call", "x", "d", 5),
        Err(StateError::Tampered)
    );
    assert_eq!(
        keys().open("AAAA====", "alice", "tools/call", "x", "d", 5),
        Err(StateError::Tampered)
    );
}

#[test]
fn rotation_opens_states_sealed_with_an_older_key() {
    let old = Keys::new(vec![Key::new(1, vec![1; 32]).unwrap()]).unwrap();
    let t = old.seal(&sample());
    let ring = Keys::new(vec![
        Key::new(2, vec![2; 32]).unwrap(),
        Key::new(1, vec![1; 32]).unwrap(),
    ])
    .unwrap();
    assert!(ring.open(&t, "alice", "tools/call", "x", "d", 5).is_ok());
}

#[test]
fn a_key_id_given_twice_is_refused() {
    let e = Keys::new(vec![
        Key::new(1, vec![2; 32]).unwrap(),
        Key::new(1, vec![1; 32]).unwrap(),
    ])
    .unwrap_err();
    assert!(e.contains("state key id 1 is given twice"), "{e}");
}

#[test]
fn the_params_digest_ignores_meta_and_key_order_but_not_values() {
    let a = params_digest(
        [
            ("name", "\"x\""),
            ("arguments", "{\"a\":1,\"b\":2}"),
            ("_meta", "{}"),
        ]
        .into_iter(),
    );
    let b = params_digest(
        [
            ("arguments", "{\"b\":2,\"a\":1}"),
            ("name", "\"x\""),
            ("requestState", "\"s\""),
        ]
        .into_iter(),
    );
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
    let alphabet: Vec<char> = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/"
        .chars()
        .collect();
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
        assert!(
            k.open(&m, "alice", "tools/call", "x", "d", 5).is_err(),
            "mutation accepted: {m}"
        );
    }
}

/// A random JSON argument object as text, with integers, fractions written as text, strings
/// (escapes included), literals, nesting.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1.0e6f64..1.0e6).prop_map(serde_json::Value::from),
        "[a-z \"\\\\é\\n]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(5, 40, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The same value with one token changed (a leaf's value or spelling, or a key), or `None` when
/// it has no token to change.
fn edit(v: &serde_json::Value, pick: usize) -> Option<serde_json::Value> {
    let mut out = v.clone();
    let mut n = 0usize;
    edit_at(&mut out, pick, &mut n).then_some(out)
}

fn edit_at(v: &mut serde_json::Value, pick: usize, n: &mut usize) -> bool {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if *n == pick {
                    let child = m.remove(&k).unwrap_or(Value::Null);
                    let mut renamed = format!("{k}x");
                    while m.contains_key(&renamed) {
                        renamed.push('x');
                    }
                    m.insert(renamed, child);
                    return true;
                }
                *n += 1;
                if edit_at(m.get_mut(&k).expect("key"), pick, n) {
                    return true;
                }
            }
            false
        }
        Value::Array(a) => a.iter_mut().any(|x| edit_at(x, pick, n)),
        leaf => {
            if *n != pick {
                *n += 1;
                return false;
            }
            *leaf = match leaf.take() {
                Value::Null => Value::from(0),
                Value::Bool(b) => Value::from(!b),
                Value::String(s) => Value::from(format!("{s}y")),
                Value::Number(x) if x.is_i64() => {
                    // `1` becomes `1.0`: the same value, another token.
                    let i = x.as_i64().unwrap_or(0);
                    if i.unsigned_abs() < (1 << 52) {
                        Value::from(i as f64)
                    } else {
                        Value::from(i.wrapping_add(1))
                    }
                }
                Value::Number(x) => Value::from(x.as_f64().unwrap_or(0.0) + 1.0),
                other => other,
            };
            true
        }
    }
}

proptest! {
    #[test]
    fn a_state_sealed_for_arguments_is_refused_for_any_single_token_edit(args in json_value(), pick in 0usize..64) {
        let wrap = |v: &serde_json::Value| serde_json::json!({"a": v}).to_string();
        let Some(edited) = edit(&args, pick) else { return Ok(()) };
        let (before, after) = (wrap(&args), wrap(&edited));
        prop_assume!(before != after);
        let k = keys();
        let digest = |a: &str| params_digest([("name", "\"t\""), ("arguments", a)].into_iter());
        let sealed = Sealed { digest: digest(&before), ..sample() };
        let t = k.seal(&sealed);
        prop_assert!(k.open(&t, "alice", "tools/call", "x", &digest(&before), 5).is_ok());
        prop_assert_eq!(k.open(&t, "alice", "tools/call", "x", &digest(&after), 5), Err(StateError::RequestChanged), "{} vs {}", before, after);
        // The same tokens, pretty-printed: the same request.
        let pretty = serde_json::to_string_pretty(&serde_json::json!({"a": args})).unwrap();
        prop_assert!(k.open(&t, "alice", "tools/call", "x", &digest(&pretty), 5).is_ok());
    }
}

#[test]
fn hex_is_lowercase_two_digits_per_byte_and_nonces_are_32_of_them() {
    assert_eq!(super::hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
    assert_eq!(super::hex(&[]), "");
    let all: Vec<u8> = (0..=255).collect();
    let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(super::hex(&all), expected);
    let n = super::nonce();
    assert!(
        n.len() == 32
            && n.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{n}"
    );
}
