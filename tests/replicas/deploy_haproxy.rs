//! deploy/haproxy.cfg as HAProxy (Debian's 2.6, as in the compose image) reads and runs it.
//!
//! `haproxy -c` accepts the file as written, where no replica name (`sluice-1`…) resolves. Then
//! HAProxy is started with it where none resolves, as compose may start it before the
//! replicas: it starts, answers 503 with every server down in maintenance; once `sluice-1`
//! resolves, it health-checks that replica and sends it traffic, without a restart.
//!
//! The copy it runs differs from the file only where a test must: the frontend binds a free
//! loopback port; `parse-resolv-conf` (the container's resolver, Docker's embedded DNS in
//! compose) becomes a `nameserver` that is the test's own, on loopback, answering A queries
//! for the names it is told and NXDOMAIN for the rest (so no query of the resolvers section
//! leaves the machine); the servers' port is the replica's; an admin socket is added to read
//! the servers' states. HAProxy's `init-addr libc` still asks the system resolver once per name
//! at start, as any program does.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::deploy_kit::read;
use crate::support::process::{scratch, Sluice};

#[test]
fn haproxy_accepts_deploy_haproxy_cfg_where_no_replica_name_resolves() {
    assert!(
        std::net::ToSocketAddrs::to_socket_addrs("sluice-1:8080").is_err(),
        "the test needs sluice-1 not to resolve here"
    );
    let out = std::process::Command::new("haproxy")
        .args(["-c", "-f", "deploy/haproxy.cfg"])
        .current_dir(super::deploy_kit::repo())
        .output();
    let out = out.expect("run haproxy -c (Debian's haproxy: apt-get install haproxy)");
    assert!(
        out.status.success(),
        "haproxy -c -f deploy/haproxy.cfg: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A DNS server on 127.0.0.1: A records for the names in `table`, NXDOMAIN for the rest, a
/// count of the queries per name.
#[derive(Clone, Default)]
struct Dns {
    table: Arc<Mutex<BTreeMap<String, Ipv4Addr>>>,
    asked: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Dns {
    async fn start(&self) -> SocketAddr {
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind a UDP port");
        let addr = sock.local_addr().expect("its address");
        let me = self.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                if let Some(reply) = me.answer(&buf[..n]) {
                    let _ = sock.send_to(&reply, from).await;
                }
            }
        });
        addr
    }

    /// The reply to one query (one question, uncompressed), or nothing for anything else.
    fn answer(&self, q: &[u8]) -> Option<Vec<u8>> {
        if q.len() < 12 || q[4..6] != [0, 1] {
            return None;
        }
        let (mut i, mut labels) = (12, Vec::new());
        loop {
            let n = *q.get(i)? as usize;
            i += 1;
            if n == 0 {
                break;
            }
            (n <= 63).then_some(())?;
            labels.push(String::from_utf8_lossy(q.get(i..i + n)?).to_ascii_lowercase());
            i += n;
        }
        let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
        q.get(i..i + 4)?;
        let name = labels.join(".");
        *self.asked.lock().unwrap().entry(name.clone()).or_default() += 1;
        let ip = self.table.lock().unwrap().get(&name).copied();
        let rcode = if ip.is_some() { 0 } else { 3 };
        let answers = u8::from(ip.is_some() && qtype == 1);
        let mut r = vec![
            q[0],
            q[1],
            0x80 | (q[2] & 0x01),
            0x80 | rcode,
            0,
            1,
            0,
            answers,
            0,
            0,
            0,
            0,
        ];
        r.extend_from_slice(&q[12..i + 4]);
        if let (Some(ip), 1) = (ip, answers) {
            r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4]);
            r.extend_from_slice(&ip.octets());
        }
        Some(r)
    }
}

/// deploy/haproxy.cfg with the test's addresses, as the module says; panics if the file lost a
/// line the test changes.
fn rendered(port: u16, dns: SocketAddr, replica_port: u16, admin: &std::path::Path) -> String {
    let cfg = read("deploy/haproxy.cfg");
    let mut out = String::new();
    for line in cfg.lines() {
        let l = match line.trim() {
            "bind :8080" => format!("    bind 127.0.0.1:{port}"),
            "parse-resolv-conf" => format!("    nameserver test {dns}"),
            "global" => format!(
                "global\n    stats socket {} mode 600 level admin",
                admin.display()
            ),
            s if s.starts_with("server sluice-") => {
                line.replace(":8080", &format!(":{replica_port}"))
            }
            _ => line.to_owned(),
        };
        out.push_str(&l);
        out.push('\n');
    }
    for (want, what) in [
        ("bind 127.0.0.1:", "bind :8080"),
        (
            "nameserver test",
            "a resolvers section with parse-resolv-conf",
        ),
        ("stats socket", "global"),
    ] {
        assert!(
            out.contains(want),
            "deploy/haproxy.cfg has no `{what}` line"
        );
    }
    out
}

/// Each server's `status` (`show stat` on the admin socket).
async fn states(admin: &std::path::Path) -> BTreeMap<String, String> {
    let mut conn = tokio::net::UnixStream::connect(admin)
        .await
        .expect("connect to the admin socket");
    conn.write_all(b"show stat\n").await.expect("ask");
    let mut csv = String::new();
    conn.read_to_string(&mut csv).await.expect("read show stat");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let col = |n: &str| {
        head.iter()
            .position(|h| *h == n)
            .unwrap_or_else(|| panic!("show stat has no {n}: {head:?}"))
    };
    let (px, sv, st) = (col("pxname"), col("svname"), col("status"));
    let rows = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f.len() > st && f[px] == "sluice" && f[sv].starts_with("sluice-"));
    rows.map(|f| (f[sv].to_owned(), f[st].to_owned())).collect()
}

/// GET `path` through HAProxy: the status and body.
async fn get(port: u16, path: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .expect("HAProxy answers");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn haproxy_starts_before_the_replicas_resolve_and_serves_one_once_its_name_does() {
    let replica = Sluice::start(
        "listen = \"127.0.0.1:0\"\n[[upstream]]\nname = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .await;
    let replica_port: u16 = replica
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the replica's port");
    let dns = Dns::default();
    let dns_addr = dns.start().await;
    let dir = scratch("haproxy-dns");
    let admin = std::env::temp_dir().join(format!(
        "sluice-haproxy-{}.sock",
        dir.file_name().unwrap_or_default().to_string_lossy()
    ));
    let (mut haproxy, port) =
        start_haproxy(&dir, |port| rendered(port, dns_addr, replica_port, &admin)).await;

    let down = states(&admin).await;
    assert_eq!(down.len(), 3, "three servers: {down:?}");
    assert!(
        down.values().all(|s| s.starts_with("MAINT")),
        "no name resolves: every server down in maintenance: {down:?}"
    );
    assert_eq!(
        get(port, "/healthz").await.0,
        503,
        "no replica: HAProxy answers 503 itself"
    );

    dns.table
        .lock()
        .unwrap()
        .insert("sluice-1".into(), Ipv4Addr::LOCALHOST);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = get(port, "/healthz").await;
        if status == 200 {
            assert_eq!(body, "ok\n", "the replica's own /healthz");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sluice-1 resolved but HAProxy did not send it traffic within 30 s: {:?}",
            states(&admin).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let now = states(&admin).await;
    // "UP 1/3" right after it leaves maintenance (its health not yet full), "UP" later.
    assert!(
        now.get("sluice-1").is_some_and(|s| s.starts_with("UP")),
        "sluice-1 is up: {now:?}"
    );
    assert!(
        ["sluice-2", "sluice-3"]
            .iter()
            .all(|s| now[*s].starts_with("MAINT")),
        "the others still down: {now:?}"
    );
    assert!(
        dns.asked
            .lock()
            .unwrap()
            .get("sluice-1")
            .is_some_and(|n| *n > 0),
        "the resolvers section asked for sluice-1"
    );
    let _ = haproxy.start_kill();
    let _ = std::fs::remove_file(&admin);
}

/// Starts HAProxy with `cfg(port)` on a free port (again on another if it loses the port), and
/// gives it once it accepts there (10 s at most).
async fn start_haproxy(
    dir: &std::path::Path,
    cfg: impl Fn(u16) -> String,
) -> (tokio::process::Child, u16) {
    for _attempt in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let (path, log) = (dir.join("haproxy.cfg"), dir.join("haproxy.log"));
        std::fs::write(&path, cfg(port)).expect("write haproxy.cfg");
        let mut child = tokio::process::Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("haproxy's log"))
            .kill_on_drop(true)
            .spawn()
            .expect("start haproxy (Debian's haproxy: apt-get install haproxy)");
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
                assert!(
                    !free,
                    "haproxy exited ({status}) with its port free: it refused the config:\n{}",
                    said()
                );
                break; // lost the port: try another
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return (child, port);
            }
            assert!(
                Instant::now() < deadline,
                "haproxy did not accept on port {port} within 10 s:\n{}",
                said()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    panic!("haproxy could not bind a free port in 5 attempts");
}
