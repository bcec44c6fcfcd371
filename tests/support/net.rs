//! Addresses where nothing answers: a port that refuses connections, and a listener whose
//! accept queue is full (connecting hangs until the caller's connect timeout).

use std::time::Duration;

/// An `http://` URL on loopback where nothing listens: its port stays bound (never listening,
/// so connections are refused) until the test process exits, so no other test can take it.
pub(crate) fn dead_url() -> String {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let addr = sock.local_addr().expect("addr");
    std::mem::forget(sock);
    format!("http://{addr}/mcp")
}

/// A loopback listener whose accept queue is full: connecting to it hangs until the caller's
/// connect timeout. Keep the value alive while it is used.
pub(crate) struct Stalled {
    _listener: tokio::net::TcpListener,
    _filler: std::net::TcpStream,
    pub(crate) url: String,
}

/// A [`Stalled`] listener.
pub(crate) fn stalled() -> Stalled {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let addr = sock.local_addr().expect("addr");
    let listener = sock.listen(0).expect("listen");
    let filler = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500))
        .expect("the one queued connection");
    Stalled {
        _listener: listener,
        _filler: filler,
        url: format!("http://{addr}/mcp"),
    }
}
