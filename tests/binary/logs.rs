//! What the `sluice` binary writes to a pipe: plain log lines, never terminal colour codes, so a
//! log collector, a file or a `grep` reads `addr=127.0.0.1:…` as written (issue 29: the first hour).

use tokio::io::AsyncBufReadExt;

#[tokio::test]
async fn log_lines_into_a_pipe_carry_no_colour_codes() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "x=http://127.0.0.1:9/mcp",
        ])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start sluice");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let listening = async {
        let mut seen = Vec::new();
        while let Some(l) = lines.next_line().await.expect("read its log") {
            let done = l.contains("sluice listening");
            seen.push(l);
            if done {
                return seen;
            }
        }
        panic!("sluice exited before listening:\n{}", seen.join("\n"));
    };
    let seen = tokio::time::timeout(std::time::Duration::from_secs(10), listening)
        .await
        .expect("sluice listens within 10 s");
    let _ = child.kill().await;
    assert!(
        seen.iter().all(|l| !l.contains('\u{1b}')),
        "colour codes in piped log lines:\n{seen:?}"
    );
    assert!(
        seen.last().unwrap().contains("addr=127.0.0.1:"),
        "the listening line as written: {seen:?}"
    );
}
