use super::*;
use book::Def;

fn seen(tool: &str, description: &str) -> Seen {
    let definition = digest::definition(tool, &json!({"description": description}));
    Seen {
        tool: tool.into(),
        def: Def {
            digest: digest::digest(&definition),
            definition,
        },
    }
}

fn temp_file(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-pins-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("pins.json")
}

fn file_pins(path: &std::path::Path, events: Arc<Mutex<Vec<Value>>>) -> Pins {
    let cfg = crate::config::Pins {
        file: Some(path.display().to_string()),
        mode: Mode::Changes,
    };
    let tell = Tell {
        event: Some(Arc::new(move |v| events.lock().unwrap().push(v))),
        ..Tell::default()
    };
    Pins::new(Some(&cfg), None, tell).unwrap()
}

#[tokio::test]
async fn a_change_made_while_sluice_was_down_is_caught_from_the_file_and_an_accept_reaches_it() {
    let path = temp_file("restart");
    let events = Arc::new(Mutex::new(Vec::new()));
    let first = file_pins(&path, events.clone());
    let q = first
        .judge("u", Mode::Changes, vec![seen("t", "adds")])
        .await;
    assert!(q.is_empty());
    assert!(path.exists(), "the first sight is stored");
    drop(first);

    // Started again: the pins are read from the file, the pulled definition is caught.
    let second = file_pins(&path, events.clone());
    let q = second
        .judge("u", Mode::Changes, vec![seen("t", "steals")])
        .await;
    assert_eq!(q, HashSet::from(["t".to_owned()]));
    let told = events.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0]["action"], "quarantined");
    assert_eq!(told[0]["tool"], "t");
    assert_eq!(told[0]["pending_digest"], seen("t", "steals").def.digest);
    assert!(
        !told[0].to_string().contains("steals"),
        "an event carries digests, never a description"
    );

    // Another process (the CLI) accepts it in the file; this one takes it on its next judgement.
    let cli = Pins::new(
        Some(&crate::config::Pins {
            file: Some(path.display().to_string()),
            mode: Mode::Changes,
        }),
        None,
        Tell::default(),
    )
    .unwrap();
    let done = cli.accept("u", None, "cli:test").await.unwrap();
    assert_eq!(done, vec![("t".to_owned(), seen("t", "steals").def.digest)]);
    let q = second
        .judge("u", Mode::Changes, vec![seen("t", "steals")])
        .await;
    assert!(q.is_empty(), "the accept made in the file is honoured");
    let listed = second.list(&["u".to_owned()]).await.unwrap();
    assert!(listed["u"]["t"].pending.is_none());
    assert!(
        !std::fs::read_dir(path.parent().unwrap()).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")),
        "no temporary file is left"
    );
}

#[tokio::test]
async fn accept_refuses_an_unknown_pin_and_one_with_nothing_to_accept() {
    let pins = Pins::in_memory(Tell::default());
    pins.judge("u", Mode::Changes, vec![seen("t", "adds")])
        .await;
    assert_eq!(
        pins.accept("u", Some("nope"), "op").await,
        Err(AcceptError::NotFound)
    );
    assert_eq!(
        pins.accept("u", Some("t"), "op").await,
        Err(AcceptError::NotQuarantined)
    );
    assert_eq!(pins.accept("u", None, "op").await, Ok(vec![]));
}

#[tokio::test]
async fn a_pins_file_that_is_not_sluices_is_refused_naming_the_file_only() {
    let path = temp_file("bad");
    std::fs::write(&path, "{\"secret description\": 1}").unwrap();
    let err = file::read(&path).unwrap_err();
    assert!(
        err.contains("pins.json") && !err.contains("secret"),
        "{err}"
    );
}

#[tokio::test]
async fn read_only_pins_judge_but_store_and_tell_nothing() {
    let path = temp_file("check");
    let events = Arc::new(Mutex::new(Vec::new()));
    let pins = file_pins(&path, events.clone());
    pins.set_read_only();
    pins.judge("u", Mode::Changes, vec![seen("t", "adds")])
        .await;
    assert!(!path.exists());
    assert!(events.lock().unwrap().is_empty());
}
