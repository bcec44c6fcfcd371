//! Idle HTTP/2 connections held from several source addresses by a separate process
//! (tests/peers/hold_h2.py): each sends the client preface and SETTINGS, no request and no
//! credential, and answers PINGs. Its report lines are read as they come, each wait bounded.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use super::peers::script;

/// The running holder; killed on drop.
pub(crate) struct H2Holders {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every line read so far.
    pub(crate) seen: Vec<String>,
}

impl H2Holders {
    /// `count` connections to 127.0.0.1:`port` from each of `sources` (addresses of this host:
    /// Linux routes all of 127/8 to lo).
    pub(crate) fn start(port: u16, count: usize, sources: &[&str]) -> H2Holders {
        let mut cmd = Command::new("python3");
        cmd.arg(script("hold_h2.py")).args([
            "--port",
            &port.to_string(),
            "--count",
            &count.to_string(),
        ]);
        for s in sources {
            cmd.args(["--source", s]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start python3 tests/peers/hold_h2.py");
        let lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
        H2Holders {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next line that starts with `prefix` (the ones before it are kept in `seen`); fails
    /// the test if none comes within `within` (a guard: a passing run ends on the line).
    pub(crate) async fn until(&mut self, prefix: &str, within: Duration) -> String {
        let read = async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read hold_h2.py")
                    .unwrap_or_else(|| panic!("hold_h2.py ended early"));
                eprintln!("hold_h2.py: {line}");
                self.seen.push(line.clone());
                if line.starts_with(prefix) {
                    return line;
                }
            }
        };
        match tokio::time::timeout(within, read).await {
            Ok(line) => line,
            Err(_) => panic!(
                "no {prefix:?} line from hold_h2.py within {within:?}; it said: {:?}",
                self.seen
            ),
        }
    }

    /// Each `SOURCE <addr> HELD <h> CLOSED <c>` line, once every source is decided, as
    /// (addr, held, closed).
    pub(crate) async fn decided(
        &mut self,
        sources: usize,
        within: Duration,
    ) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        for _ in 0..sources {
            let line = self.until("SOURCE ", within).await;
            let w: Vec<&str> = line.split_whitespace().collect();
            out.push((
                w[1].to_owned(),
                w[3].parse().expect("a count"),
                w[5].parse().expect("a count"),
            ));
        }
        out
    }

    /// Ends it (closing its stdin) and waits for it.
    pub(crate) async fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}
