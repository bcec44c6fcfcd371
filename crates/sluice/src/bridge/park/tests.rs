use std::time::{Duration, Instant};

use super::{Owned, Table};

struct E(&'static str, u32);

impl Owned for E {
    fn principal(&self) -> &str {
        self.0
    }
}

#[test]
fn counts_per_principal_follow_inserts_takes_expiry_and_drain() {
    let t: Table<E> = Table::new(10);
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    t.insert("a1".into(), E("alice", 1), at(30)).ok().unwrap();
    t.insert("a2".into(), E("alice", 2), at(10)).ok().unwrap();
    t.insert("b1".into(), E("bob", 3), at(20)).ok().unwrap();
    assert_eq!(
        (
            t.count_for("alice"),
            t.count_for("bob"),
            t.count_for("carol"),
            t.len()
        ),
        (2, 1, 0, 3)
    );
    assert_eq!(t.peek("a1", |e| e.1), Some(1));
    assert_eq!(t.take("a1").map(|e| e.1), Some(1));
    assert!(t.take("a1").is_none(), "taken once");
    assert_eq!(t.count_for("alice"), 1);
    // Expiry takes from the earliest deadline, and only those passed.
    assert!(t.expired(at(5)).is_empty());
    let gone: Vec<u32> = t.expired(at(25)).iter().map(|e| e.1).collect();
    assert_eq!(gone, [2, 3], "earliest first");
    assert_eq!(
        (t.count_for("alice"), t.count_for("bob"), t.len()),
        (0, 0, 0)
    );
    assert!(t.is_empty());
    t.insert("c1".into(), E("carol", 4), at(40)).ok().unwrap();
    assert_eq!(t.drain().len(), 1);
    assert_eq!((t.count_for("carol"), t.len()), (0, 0));
    assert!(
        t.expired(at(100)).is_empty(),
        "the deadline index was cleared with the table"
    );
}

#[test]
fn a_full_table_gives_the_entry_back_and_a_handle_seen_again_is_counted_once() {
    let t: Table<E> = Table::new(2);
    let d = Instant::now() + Duration::from_secs(60);
    t.insert("x".into(), E("alice", 1), d).ok().unwrap();
    t.insert("x".into(), E("alice", 2), d + Duration::from_secs(1))
        .ok()
        .unwrap();
    assert_eq!((t.len(), t.count_for("alice")), (1, 1));
    t.insert("y".into(), E("bob", 3), d).ok().unwrap();
    let back = t.insert("z".into(), E("bob", 4), d).err().expect("full");
    assert_eq!(back.1, 4);
    assert_eq!(t.count_for("bob"), 1);
    let all: Vec<u32> = t
        .expired(d + Duration::from_secs(5))
        .iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(
        all.len(),
        2,
        "the replaced entry's old deadline is gone with it: {all:?}"
    );
}

#[test]
fn many_parked_for_one_principal_cost_no_scan_per_park() {
    // 100k entries of one principal: counting before each park, as a round does, stays O(1).
    let t: Table<E> = Table::new(100_000);
    let d = Instant::now() + Duration::from_secs(600);
    let started = std::time::Instant::now();
    for i in 0..100_000u32 {
        assert_eq!(t.count_for("alice"), i as usize);
        t.insert(
            format!("h{i:08}"),
            E("alice", i),
            d + Duration::from_micros(u64::from(i)),
        )
        .ok()
        .unwrap();
    }
    // A scan per park is 5 billion entry visits here (minutes); the index, about a second in a
    // debug build on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(t.expired(d + Duration::from_micros(10)).len(), 11);
}

#[test]
fn the_principal_cap_is_checked_under_the_tables_lock() {
    let t: std::sync::Arc<Table<E>> = std::sync::Arc::new(Table::new(1000));
    let d = Instant::now() + Duration::from_secs(60);
    // Eight threads park 50 each for one principal, capped at 16: exactly 16 get in.
    let threads: Vec<_> = (0..8)
        .map(|k| {
            let t = t.clone();
            std::thread::spawn(move || {
                (0..50)
                    .filter(|i| {
                        t.insert_capped(format!("h{k}-{i}"), E("alice", 0), d, 16)
                            .is_ok()
                    })
                    .count()
            })
        })
        .collect();
    let admitted: usize = threads.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!((admitted, t.count_for("alice")), (16, 16));
    let (_, mine) = t
        .insert_capped("x".into(), E("alice", 0), d, 16)
        .err()
        .expect("capped");
    assert!(mine, "refused for the principal's cap");
    assert!(
        t.insert_capped("y".into(), E("bob", 0), d, 16).is_ok(),
        "another principal's own cap"
    );
}

#[test]
fn the_oldest_of_a_principal_is_taken_among_those_picked_and_only_its_own() {
    let t: Table<E> = Table::new(10);
    let now = Instant::now();
    let at = |ms| now + Duration::from_millis(ms);
    t.insert("a1".into(), E("alice", 1), at(30)).ok().unwrap();
    t.insert("a2".into(), E("alice", 2), at(10)).ok().unwrap();
    t.insert("a3".into(), E("alice", 3), at(20)).ok().unwrap();
    t.insert("b1".into(), E("bob", 4), at(5)).ok().unwrap();
    assert!(t.take_oldest_of("carol", |_| true).is_none());
    assert_eq!(
        t.take_oldest_of("alice", |e| e.1 != 2)
            .map(|(h, e)| (h, e.1)),
        Some(("a3".into(), 3)),
        "the first to expire of those picked"
    );
    assert_eq!(
        t.take_oldest_of("alice", |_| true).map(|(_, e)| e.1),
        Some(2)
    );
    assert!(
        t.take_oldest_of("alice", |e| e.1 == 4).is_none(),
        "never another principal's"
    );
    assert_eq!(
        (t.count_for("alice"), t.count_for("bob"), t.len()),
        (1, 1, 2)
    );
    assert!(
        t.take("a3").is_none() && t.take("a2").is_none(),
        "taken out of the table"
    );
    let gone: Vec<u32> = t.expired(at(100)).iter().map(|e| e.1).collect();
    assert_eq!(gone, [4, 1], "the deadline index forgot what was taken");
}
