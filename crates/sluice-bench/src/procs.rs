//! The processes a benchmark run starts: spawned with a log file each, their pids appended to a
//! pid file (so the calling script can stop them whatever happens), killed when dropped.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use http::Uri;
use sluice::upstream::client::{Answer, HttpClient};

/// A started process, killed (SIGKILL) and reaped when dropped, and then struck from the pid file.
pub(crate) struct Proc {
    pub(crate) name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Option<mpsc::Receiver<String>>,
    pid_file: Option<PathBuf>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Reaped: its pid may be reused by anyone now, so the calling script must not kill it.
        if let Some(f) = &self.pid_file {
            if let Ok(text) = std::fs::read_to_string(f) {
                let me = self.child.id().to_string();
                let kept: String = text
                    .lines()
                    .filter(|l| l.trim() != me)
                    .map(|l| format!("{l}\n"))
                    .collect();
                let _ = std::fs::write(f, kept);
            }
        }
    }
}

/// Where a run keeps its files and which pids it started.
#[derive(Clone)]
pub(crate) struct Env {
    pub(crate) dir: PathBuf,
    pub(crate) pid_file: Option<PathBuf>,
}

impl Env {
    /// Starts `program args`, stderr (and stdout, unless `read_stdout`) to `<dir>/<name>.log`.
    /// With `read_stdout`, stdout lines can be awaited with [`Proc::line`].
    pub(crate) fn spawn(
        &self,
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, &str)],
        read_stdout: bool,
    ) -> Result<Proc, String> {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stderr(log.try_clone().map_err(|e| e.to_string())?);
        cmd.stdout(if read_stdout {
            Stdio::piped()
        } else {
            Stdio::from(log)
        });
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        if let Some(f) = &self.pid_file {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
            {
                let _ = writeln!(f, "{}", child.id());
            }
        }
        let stdin = child.stdin.take();
        let lines = child.stdout.take().map(|out| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
            rx
        });
        Ok(Proc {
            name: name.to_owned(),
            child,
            stdin,
            lines,
            pid_file: self.pid_file.clone(),
        })
    }
}

impl Proc {
    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stdout line starting with `prefix`; gives the rest of it.
    pub(crate) fn line(&mut self, prefix: &str, within: Duration) -> Result<String, String> {
        let rx = self.lines.as_ref().ok_or("stdout not captured")?;
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) => {
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return Ok(rest.trim().to_owned());
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "{} printed no {prefix:?} line within {within:?} (see its log)",
                        self.name
                    ))
                }
            }
        }
    }

    /// Asks the process to stop (SIGTERM) and waits up to `within` for it to exit; true if it did.
    pub(crate) fn terminate(&mut self, within: Duration) -> bool {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        self.wait_exit(within)
    }

    /// Closes its stdin (a peer started with `--parent-stdin` exits) and waits up to `within`.
    pub(crate) fn close_stdin(&mut self, within: Duration) -> bool {
        drop(self.stdin.take());
        self.wait_exit(within)
    }

    fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

/// The resident set size of a process in KiB (`VmRSS`).
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Every descendant of `pid` (children, their children, ...), from the parent pids in /proc.
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // After the parenthesized command name: the state, then the parent's pid.
        if let Some(pp) = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok())
        {
            parent.push((p, pp));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let of = found[i];
        found.extend(parent.iter().filter(|(_, pp)| *pp == of).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

/// A free loopback port (bound, then released for the child to bind).
pub(crate) fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// The client the benchmark's own Rust loops use: Sluice's pooled upstream client.
pub(crate) fn client() -> HttpClient {
    HttpClient::new(
        Duration::from_secs(2),
        Duration::from_secs(30),
        16 << 20,
        4 << 20,
        Duration::from_secs(24 * 3600),
    )
}

/// Waits until `GET base/readyz` answers 200.
pub(crate) async fn wait_ready(c: &HttpClient, base: &str, within: Duration) -> Result<(), String> {
    let url: Uri = format!("{base}/readyz")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let got = c
            .send(
                http::Method::GET,
                "sluice",
                &url,
                Default::default(),
                bytes::Bytes::new(),
                None,
            )
            .await;
        if let Ok((
            _,
            Answer::Json(http::StatusCode::OK, _) | Answer::Status(http::StatusCode::OK, _),
        )) = got
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{base} was not ready within {within:?}"))
}

/// Median and (min, max) of a sample.
pub(crate) fn stats(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    let med = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (med, s[0], s[n - 1])
}

/// The p-th percentile (0..=100) of a sample (nearest rank).
pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_spreads_and_percentiles() {
        assert_eq!(stats(&[5.0, 1.0, 3.0]), (3.0, 1.0, 5.0));
        assert_eq!(stats(&[4.0, 1.0, 3.0, 2.0]).0, 2.5);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!((percentile(&v, 50.0), percentile(&v, 99.0)), (50.0, 99.0));
    }
}
