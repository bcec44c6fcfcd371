//! What the deploy tests share: the commands the deploy files document in their comments, run
//! as a person would paste them, and `sluice check`'s verdict.
//!
//! A documented command runs in bash from the repository root with nothing inherited: PATH is a
//! scratch directory holding `sluice` (the binary under test) and a stand-in for each tool that
//! cannot run here (`docker`, `helm`: no engine, no cluster), then `/usr/bin:/bin` (`openssl`,
//! `sha256sum`). A stand-in does nothing but record the words it was given, after the shell
//! expanded them (`$(sluice hash-key …)`, `$(openssl rand …)`, quotes, `$PWD`); the test then
//! does with those words what the tool would, as far as it can be done here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::process::scratch;

/// The repository's root.
pub(super) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository, as text.
pub(super) fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The commands a file's comments document that begin with `first` (e.g. `docker run`): each
/// from its first line through its `\` continuations, joined as the shell would read them, the
/// comment marker `marker` and the indentation removed.
pub(super) fn documented(text: &str, marker: &str, first: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        let Some(body) = line.trim_start().strip_prefix(marker).map(str::trim) else {
            out.extend(open.take());
            continue;
        };
        let cmd = match open.as_mut() {
            Some(cmd) => {
                cmd.push_str(body);
                cmd
            }
            None if body.starts_with(first) => open.insert(body.to_owned()),
            None => continue,
        };
        match cmd.strip_suffix('\\') {
            Some(head) => *cmd = format!("{head} "),
            None => out.extend(open.take()),
        }
    }
    out.extend(open);
    out
}

/// What a documented command did: its exit, its output and each stand-in call's words (the
/// tool's name first), in order.
pub(super) struct Ran {
    pub(super) ok: bool,
    pub(super) stdout: String,
    pub(super) stderr: String,
    pub(super) calls: Vec<Vec<String>>,
}

/// Runs `script` with `bash -euo pipefail` as the module says, `stand_ins` recording.
pub(super) fn run_documented(script: &str, stand_ins: &[&str]) -> Ran {
    let dir = scratch("documented");
    let (bin, calls) = (dir.join("bin"), dir.join("calls"));
    std::fs::create_dir_all(&bin).expect("a bin directory");
    std::fs::create_dir_all(&calls).expect("a calls directory");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), bin.join("sluice"))
        .expect("link sluice");
    let record = "#!/bin/sh\nn=$(ls \"$CALLS\" | wc -l)\nprintf '%s\\0' \"$(basename \"$0\")\" \"$@\" > \"$CALLS/$(printf %04d \"$n\")\"\n";
    for tool in stand_ins {
        let path = bin.join(tool);
        std::fs::write(&path, record).expect("write a stand-in");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("make it executable");
    }
    let out = Command::new("/bin/bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(repo())
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", &dir)
        .env("CALLS", &calls)
        .output()
        .expect("run bash");
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        calls: recorded(&calls),
    }
}

fn recorded(dir: &Path) -> Vec<Vec<String>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the calls")
        .map(|e| e.expect("an entry").path())
        .collect();
    names.sort();
    let words = |p: &PathBuf| {
        std::fs::read(p)
            .expect("a call")
            .split(|b| *b == 0)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    };
    names
        .iter()
        .map(|p| {
            let mut w: Vec<String> = words(p);
            w.pop(); // after the last NUL
            w
        })
        .collect()
}

/// Asserts `sluice check` (stdout, stderr) gave the verdict `ok:` and says so for `what`.
pub(super) fn assert_check_ok(what: &str, ok: bool, stdout: &str, stderr: &str) {
    let verdict = stdout.lines().next().unwrap_or_default();
    assert!(
        ok && verdict.starts_with("ok: config valid"),
        "{what}: sluice check did not accept it: {verdict}\n{stderr}"
    );
}
