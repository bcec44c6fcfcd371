use super::*;
use serde_json::json;

fn seen(tool: &str, description: &str) -> Seen {
    let definition = crate::pins::digest::definition(tool, &json!({"description": description}));
    Seen {
        tool: tool.into(),
        def: Def {
            digest: crate::pins::digest::digest(&definition),
            definition,
        },
    }
}

#[test]
fn the_first_sight_pins_a_change_is_quarantined_once_told_and_an_accept_clears_it() {
    let mut book = Entries::new();
    let first = judge(
        &mut book,
        Mode::Changes,
        vec![seen("a", "adds"), seen("b", "x")],
        1,
    );
    assert!(first.quarantined.is_empty() && first.changes.is_empty());
    assert_eq!(first.dirty, ["a", "b"]);
    let again = judge(
        &mut book,
        Mode::Changes,
        vec![seen("a", "adds"), seen("b", "x")],
        2,
    );
    assert!(
        again.dirty.is_empty(),
        "nothing to store when nothing changed"
    );

    let pulled = judge(
        &mut book,
        Mode::Changes,
        vec![seen("a", "steals"), seen("b", "x")],
        3,
    );
    assert_eq!(pulled.quarantined, HashSet::from(["a".to_owned()]));
    assert_eq!(pulled.changes.len(), 1);
    let c = &pulled.changes[0];
    assert_eq!((c.tool.as_str(), c.reason), ("a", Reason::Changed));
    assert_eq!(
        c.old.as_deref(),
        Some(seen("a", "adds").def.digest.as_str())
    );
    assert_eq!(c.new, seen("a", "steals").def.digest);
    assert_eq!(book["a"].pending.as_ref().map(|p| p.since_ms), Some(3));

    let still = judge(&mut book, Mode::Changes, vec![seen("a", "steals")], 4);
    assert!(still.quarantined.contains("a"));
    assert!(still.changes.is_empty(), "a change is told once");

    assert_eq!(accept(&mut book, "b"), Err(Refused::NotQuarantined));
    assert_eq!(accept(&mut book, "zz"), Err(Refused::NotFound));
    assert_eq!(accept(&mut book, "a"), Ok(seen("a", "steals").def.digest));
    let after = judge(&mut book, Mode::Changes, vec![seen("a", "steals")], 5);
    assert!(after.quarantined.is_empty() && after.changes.is_empty());
}

#[test]
fn a_definition_changed_back_is_released_without_an_accept() {
    let mut book = Entries::new();
    judge(&mut book, Mode::Changes, vec![seen("a", "adds")], 1);
    judge(&mut book, Mode::Changes, vec![seen("a", "steals")], 2);
    let back = judge(&mut book, Mode::Changes, vec![seen("a", "adds")], 3);
    assert!(back.quarantined.is_empty());
    assert_eq!(back.dirty, ["a"], "the pending one is cleared and stored");
    assert!(book["a"].pending.is_none());
}

#[test]
fn strict_pins_the_first_list_then_quarantines_new_tools_and_changes_does_not() {
    let mut book = Entries::new();
    let first = judge(&mut book, Mode::Strict, vec![seen("a", "adds")], 1);
    assert!(
        first.quarantined.is_empty(),
        "trust on first use of the upstream"
    );
    let next = judge(
        &mut book,
        Mode::Strict,
        vec![seen("a", "adds"), seen("n", "new")],
        2,
    );
    assert_eq!(next.quarantined, HashSet::from(["n".to_owned()]));
    assert_eq!(next.changes[0].reason, Reason::New);
    assert_eq!(next.changes[0].old, None);
    assert_eq!(accept(&mut book, "n"), Ok(seen("n", "new").def.digest));
    let mut other = Entries::new();
    judge(&mut other, Mode::Changes, vec![seen("a", "adds")], 1);
    let quiet = judge(&mut other, Mode::Changes, vec![seen("n", "new")], 2);
    assert!(quiet.quarantined.is_empty(), "changes pins a new tool");
}

#[test]
fn off_judges_nothing_and_the_book_is_bounded() {
    let mut book = Entries::new();
    let off = judge(&mut book, Mode::Off, vec![seen("a", "adds")], 1);
    assert!(off.dirty.is_empty() && book.is_empty());
    let many: Vec<Seen> = (0..MAX_PER_UPSTREAM + 2)
        .map(|i| seen(&format!("t{i}"), "d"))
        .collect();
    let judged = judge(&mut book, Mode::Changes, many, 1);
    assert_eq!(book.len(), MAX_PER_UPSTREAM);
    assert_eq!(judged.quarantined.len(), 2, "past the limit, fail closed");
    assert!(judged.changes.iter().all(|c| c.reason == Reason::New));
}

#[test]
fn an_entry_round_trips_through_json() {
    let mut book = Entries::new();
    judge(&mut book, Mode::Changes, vec![seen("a", "adds")], 1);
    judge(&mut book, Mode::Changes, vec![seen("a", "steals")], 2);
    let text = serde_json::to_string(&book).unwrap();
    let back: Entries = serde_json::from_str(&text).unwrap();
    assert_eq!(back, book);
    assert!(text.contains("\"reason\":\"changed\""));
}
