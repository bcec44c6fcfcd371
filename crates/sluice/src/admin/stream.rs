//! `GET /admin/v1/events`: the event stream (SSE).
//!
//! Takes the process's event bus; gives each event published after the stream opened as one
//! SSE message (`id:` its sequence number, `event:` its kind, `data:` its JSON), a comment every
//! [`KEEPALIVE`] so proxies keep the stream, and a `lagged` event when the reader fell more than
//! the bus's capacity behind. Ends at shutdown. Refuses nothing itself (the router
//! authenticated it and gave it one of the listener's `MAX_STREAMS` places).

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::broadcast::error::RecvError;

use super::{Answer, Cx};

/// How often an idle stream sends a comment.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// Opens the stream; it holds `place` (one of the listener's `MAX_STREAMS`) while open.
pub fn events(cx: &Cx, place: tokio::sync::OwnedSemaphorePermit) -> Answer {
    let rx = cx.gw.rt.events.subscribe();
    let stop = cx.gw.rt.shutdown.clone();
    let hello = format!(": events of replica {}\n\n", cx.gw.cfg.state.replica);
    let stream = futures_util::stream::unfold(
        (rx, stop, Some(hello), place),
        |(mut rx, stop, hello, place)| async move {
            if let Some(h) = hello {
                return Some((Ok(frame(h)), (rx, stop, None, place)));
            }
            let text = tokio::select! {
                _ = stop.cancelled() => return None,
                got = tokio::time::timeout(KEEPALIVE, rx.recv()) => match got {
                    Err(_) => ": keepalive\n\n".to_owned(),
                    Ok(Ok(e)) => format!(
                        "id: {}\nevent: {}\ndata: {}\n\n",
                        e.seq,
                        e.kind.as_str(),
                        serde_json::to_string(&e).unwrap_or_default()
                    ),
                    Ok(Err(RecvError::Lagged(n))) => {
                        format!("event: lagged\ndata: {{\"missed\":{n}}}\n\n")
                    }
                    Ok(Err(RecvError::Closed)) => return None,
                },
            };
            Some((Ok(frame(text)), (rx, stop, None, place)))
        },
    );
    let body = http_body_util::StreamBody::new(stream).boxed();
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

fn frame(text: String) -> hyper::body::Frame<Bytes> {
    hyper::body::Frame::data(Bytes::from(text))
}
