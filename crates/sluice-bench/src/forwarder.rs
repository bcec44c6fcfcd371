//! The do-nothing forwarder: the floor for any gateway on this machine.
//!
//! Built like Sluice: the same release profile and crate versions (it is a target of the same
//! package), the same runtime (`#[tokio::main]`), the same server (hyper-util `auto::Builder`,
//! `serve_connection_with_upgrades`, graceful watch, `TCP_NODELAY`) and the same pooled client
//! (hyper-util legacy `Client`, `HttpConnector` with connect timeout and `TCP_NODELAY`, 90 s idle,
//! 256 idle per host). It reads the request body into `Bytes`, sends those bytes to the one
//! upstream with the client's headers (hop-by-hop ones dropped, `Host` set), reads the answer
//! into `Bytes` and sends it back with its status and content type. Nothing is parsed.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;

type Body = BoxBody<Bytes, Infallible>;

#[derive(Clone)]
struct Fwd {
    client: Client<HttpConnector, Full<Bytes>>,
    to: Uri,
    host: HeaderValue,
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

fn status(s: StatusCode) -> Response<Body> {
    Response::builder()
        .status(s)
        .body(Full::new(Bytes::new()).boxed())
        .unwrap_or_default()
}

impl Fwd {
    async fn handle(self, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = body.collect().await.map(|c| c.to_bytes()) else {
            return Ok(status(StatusCode::BAD_REQUEST));
        };
        let mut headers = parts.headers;
        for h in HOP_BY_HOP {
            headers.remove(*h);
        }
        headers.insert(http::header::HOST, self.host.clone());
        let Ok(mut up) = Request::builder()
            .method(parts.method)
            .uri(self.to.clone())
            .body(Full::new(bytes))
        else {
            return Ok(status(StatusCode::BAD_GATEWAY));
        };
        *up.headers_mut() = headers;
        let Ok(resp) = self.client.request(up).await else {
            return Ok(status(StatusCode::BAD_GATEWAY));
        };
        let (p, b) = resp.into_parts();
        let Ok(bytes) = b.collect().await.map(|c| c.to_bytes()) else {
            return Ok(status(StatusCode::BAD_GATEWAY));
        };
        let mut out = Response::builder().status(p.status);
        if let Some(ct) = p.headers.get(http::header::CONTENT_TYPE) {
            out = out.header(http::header::CONTENT_TYPE, ct.clone());
        }
        Ok(out.body(Full::new(bytes).boxed()).unwrap_or_default())
    }
}

/// Runs the forwarder in front of `to`; prints `LISTENING <port>`.
pub(crate) async fn serve(to: &str) -> Result<(), String> {
    let to: Uri = to.parse().map_err(|e| format!("--to {to:?}: {e}"))?;
    let host = HeaderValue::from_str(to.authority().map(|a| a.as_str()).unwrap_or(""))
        .map_err(|e| e.to_string())?;
    let mut conn = HttpConnector::new();
    conn.set_connect_timeout(Some(Duration::from_secs(2)));
    conn.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(256)
        .build(conn);
    let fwd = Fwd { client, to, host };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "LISTENING {}",
        listener.local_addr().map_err(|e| e.to_string())?.port()
    );
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let fwd = fwd.clone();
        let svc = service_fn(move |req| fwd.clone().handle(req));
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}
