use std::net::IpAddr;
use std::time::Duration;

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn proven(h: &Held) {
    let mut ext = http::Extensions::new();
    ext.insert(h.activity().unproven().expect("not proven yet"));
    authenticated(&ext);
}

#[tokio::test]
async fn a_source_holds_its_share_and_a_full_table_takes_the_oldest_idle_connection_without_an_authenticated_request(
) {
    let t = Table::new(3, 2);
    let a1 = t.admit(ip("10.0.0.1")).unwrap();
    let a2 = t.admit(ip("10.0.0.1")).unwrap();
    assert_eq!(t.admit(ip("10.0.0.1")).err(), Some(Refused::Share(2)));
    let b1 = t.admit(ip("10.0.0.2")).unwrap();
    assert_eq!(t.in_use(), 3);
    // a1 (the oldest) is proven, a2 has a request in progress: b1 makes room.
    proven(&a1);
    let _busy = a2.activity().begin();
    let c1 = t.admit(ip("10.0.0.3")).expect("room made");
    assert!(
        b1.activity().evicted.is_cancelled(),
        "the oldest idle unproven connection was told to close"
    );
    assert!(!a1.activity().evicted.is_cancelled() && !a2.activity().evicted.is_cancelled());
    assert_eq!(t.in_use(), 3, "the new connection took its place");
    drop(b1);
    assert_eq!(
        t.in_use(),
        3,
        "the evicted connection's end frees nothing more"
    );
    // c1 is the one idle connection without an authenticated request left: it makes room next.
    let d1 = t.admit(ip("10.0.0.4")).expect("c1 makes room");
    assert!(c1.activity().evicted.is_cancelled());
    drop(c1);
    let _busy_d = d1.activity().begin();
    assert_eq!(
        t.admit(ip("10.0.0.5")).err(),
        Some(Refused::Pool(3)),
        "only proven or busy connections are left"
    );
    assert_eq!(
        t.sources.held_by(&ip("10.0.0.5")),
        0,
        "a refused source holds no share"
    );
}

#[tokio::test]
async fn a_dropped_connection_gives_its_place_and_share_back() {
    let t = Table::new(1, 1);
    let a = t.admit(ip("10.0.0.1")).unwrap();
    proven(&a);
    assert_eq!(
        t.admit(ip("10.0.0.2")).err(),
        Some(Refused::Pool(1)),
        "a proven connection is never taken"
    );
    drop(a);
    assert_eq!(t.in_use(), 0);
    let _again = t
        .admit(ip("10.0.0.1"))
        .expect("its place and its source's share are free again");
    assert!(locked(&t.unproven).len() == 1);
}

#[tokio::test(start_paused = true)]
async fn a_connection_is_idle_after_its_first_deadline_or_after_its_last_request_ended() {
    let t = Table::new(4, 4);
    let h = t.admit(ip("10.0.0.1")).unwrap();
    let a = h.activity().clone();
    let start = tokio::time::Instant::now();
    a.idle(start, Duration::from_secs(2), Duration::from_secs(5))
        .await;
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2),
        "no request: idle after the first deadline"
    );
    // A request in progress (a stream) keeps it busy however long; once it ends, `between`.
    let busy = a.begin();
    let idle = tokio::spawn({
        let a = a.clone();
        async move {
            a.idle(start, Duration::from_secs(2), Duration::from_secs(5))
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!idle.is_finished(), "a request in progress is not idle");
    let ended = tokio::time::Instant::now();
    drop(busy);
    idle.await.unwrap();
    assert_eq!(ended.elapsed(), Duration::from_secs(5));
    // Requests that begin and end while its timer waits push the deadline to the last end.
    let busy = a.begin();
    let idle = tokio::spawn({
        let a = a.clone();
        async move {
            a.idle(start, Duration::from_secs(2), Duration::from_secs(5))
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(busy);
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(a.begin());
    let last = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !idle.is_finished(),
        "4 s after its last request, not yet idle"
    );
    idle.await.unwrap();
    assert_eq!(last.elapsed(), Duration::from_secs(5));
}

#[tokio::test]
async fn a_tracked_body_holds_its_request_until_it_ends() {
    use http_body_util::BodyExt;
    let t = Table::new(1, 1);
    let h = t.admit(ip("10.0.0.1")).unwrap();
    let body = Tracked::new(
        http_body_util::Full::new(bytes::Bytes::from_static(b"ok")),
        h.activity().begin(),
    );
    assert_eq!(h.activity().busy.load(Ordering::Acquire), 1);
    let got = body.collect().await.unwrap().to_bytes();
    assert_eq!(&got[..], b"ok");
    assert_eq!(
        h.activity().busy.load(Ordering::Acquire),
        0,
        "ended (and dropped): no longer in progress"
    );
    let unread = Tracked::new(
        http_body_util::Full::new(bytes::Bytes::from_static(b"ok")),
        h.activity().begin(),
    );
    drop(unread);
    assert_eq!(
        h.activity().busy.load(Ordering::Acquire),
        0,
        "dropped unread: the request is over"
    );
}
