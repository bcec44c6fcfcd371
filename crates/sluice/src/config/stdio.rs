//! The keys of a stdio `[[upstream]]` (`command = [...]`, or `--upstream NAME=stdio:COMMAND ARGS`):
//! the process Sluice starts and how it is bounded.
//!
//! Takes the raw stdio keys of one upstream; gives a [`StdioConfig`]. Refuses an empty command
//! or program, an `env` name that is empty or holds `=` or NUL, an `inherit` entry that names
//! no variable or prefix (`inherit`), a `stderr` that is neither `"drop"` nor `"file:PATH"`,
//! `max_processes = 0`, a `max_processes_per_principal` of 0 or over `max_processes`, an
//! `idle_ms` of 0 or over a day, and the HTTP-only keys (`headers`, `bearer_token_env`) or
//! `era = "2026-07-28"` next to a command, naming the upstream; a `user` or `group` the user
//! database does not resolve (`run_as`); the stdio keys next to a `url`.

pub(super) mod inherit;
pub(super) mod run_as;

use std::path::PathBuf;

use serde::Serialize;

use self::run_as::{RawId, RunGroup, RunUser};
use super::raw::RawUpstream;
use super::redact::redact_map;
use super::ConfigError;

/// Where a stdio upstream's stderr goes. It is the server's diagnostics and may carry content:
/// it never reaches Sluice's own log or the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Stderr {
    /// Read and dropped (the default).
    #[default]
    Drop,
    /// Appended to this file, which is rotated to `PATH.1` at `stderr_max_bytes`.
    File(PathBuf),
}

impl Serialize for Stderr {
    /// As written: `"drop"` or `"file:PATH"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Stderr::Drop => s.serialize_str("drop"),
            Stderr::File(p) => s.serialize_str(&format!("file:{}", p.display())),
        }
    }
}

/// How to start and bound one stdio upstream.
#[derive(Clone, PartialEq, Serialize)]
pub struct StdioConfig {
    /// The program and its arguments, run directly (never through a shell). Printed through the
    /// one redaction (`redact.rs`): URL credentials, and values after secret-named flags.
    pub command: Vec<String>,
    /// Environment variables set for it, over what it inherits of Sluice's.
    #[serde(serialize_with = "redact_map")]
    pub env: Vec<(String, String)>,
    /// Whether it inherits Sluice's proxy, CA and package-runner variables (and XDG
    /// directories, without `user`) besides `PATH`, `HOME`, `USER`, `LANG`, `LC_ALL`, `TMPDIR`
    /// and `TZ` (default true; `upstream::stdio::env`).
    pub inherit_env: bool,
    /// More of Sluice's variables it inherits: names, or `PREFIX*` patterns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inherit: Vec<String>,
    /// The variables Sluice's config names as its own secrets: never inherited, whatever
    /// pattern they match (filled where the config is assembled).
    #[serde(skip)]
    pub secret_env: Vec<String>,
    /// How long one of its processes may be idle before it is ended: a session no call uses
    /// (or `bridge.session_idle_ms`, when shorter), a warm spare no session took (default 60 s).
    #[serde(with = "super::limits::ms", rename = "idle_ms")]
    pub idle: std::time::Duration,
    /// Its working directory (default: Sluice's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Where its stderr goes.
    pub stderr: Stderr,
    /// The stderr file is rotated past this many bytes (default 10 MiB).
    pub stderr_max_bytes: u64,
    /// Processes of this upstream at once: one per 2025-11-25 session, Sluice's own and spares
    /// included (default 4: each is a whole server, often 50 to 100 MB).
    pub max_processes: usize,
    /// Processes of this upstream one principal may hold at once (each serving one of its
    /// calls, parked ones included), so that one principal cannot take them all. Default a
    /// quarter of `max_processes` (at least 1); all of them when `[auth]` configures no
    /// credentials (every caller is then the one principal `local`).
    pub max_processes_per_principal: usize,
    /// Processes started ahead of need and kept warm, so a new session does not wait for the
    /// server to boot (default 1; at most `max_processes`).
    pub spare_processes: usize,
    /// How long a process Sluice started has to answer `initialize` (default 30 s): the time
    /// its server takes to boot (an `npx` download, a Python import), apart from
    /// `timeouts.response_ms`, which bounds every answer after it.
    #[serde(with = "super::limits::ms", rename = "start_ms")]
    pub start: std::time::Duration,
    /// The user its processes run as (default: Sluice's own); needs Sluice to be able to switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<RunUser>,
    /// The group its processes run as (default: `user`'s primary group, else Sluice's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<RunGroup>,
}

impl StdioConfig {
    /// The uid its processes run as, when it is not Sluice's.
    pub fn uid(&self) -> Option<u32> {
        self.user.as_ref().map(|u| u.uid)
    }

    /// The gid its processes run as, when it is not Sluice's: `group`, else `user`'s primary group.
    pub fn gid(&self) -> Option<u32> {
        self.group
            .as_ref()
            .map(|g| g.gid)
            .or_else(|| self.user.as_ref().and_then(|u| u.gid))
    }
}

impl std::fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioConfig")
            .field("program", &self.command.first())
            .field("args", &self.command.len().saturating_sub(1))
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("inherit_env", &self.inherit_env)
            .field("inherit", &self.inherit)
            .field("idle", &self.idle)
            .field("cwd", &self.cwd)
            .field("stderr", &self.stderr)
            .field("max_processes", &self.max_processes)
            .field(
                "max_processes_per_principal",
                &self.max_processes_per_principal,
            )
            .field("spare_processes", &self.spare_processes)
            .field("start", &self.start)
            .field("user", &self.user.as_ref().map(|u| &u.written))
            .field("group", &self.group.as_ref().map(|g| &g.written))
            .finish()
    }
}

/// The most processes one stdio upstream may run (a bound on what a config can make Sluice fork).
const MAX_PROCESSES: usize = 4096;

/// The longest `start_ms` (10 minutes): a process that boots slower is not waited for.
const MAX_START_MS: u64 = 600_000;

/// The default `max_processes`: a laptop runs a few servers of each kind, not dozens.
const DEFAULT_MAX_PROCESSES: usize = 4;

/// The default and longest `idle_ms` (a minute; a day).
const DEFAULT_IDLE_MS: u64 = 60_000;
const MAX_IDLE_MS: u64 = 86_400_000;

/// `stderr`: `"drop"` (the default) or `"file:PATH"`.
fn stderr(
    written: Option<&str>,
    bad: impl Fn(String) -> ConfigError,
) -> Result<Stderr, ConfigError> {
    Ok(match written {
        None | Some("drop") => Stderr::Drop,
        Some(s) => match s.strip_prefix("file:") {
            Some(p) if !p.trim().is_empty() => Stderr::File(PathBuf::from(p)),
            _ => {
                return Err(bad(format!(
                    "stderr = {s:?}: expected \"drop\" or \"file:PATH\""
                )))
            }
        },
    })
}

/// Refuses a stdio upstream whose stderr file is the audit sink or Sluice's own output: a
/// server's stderr may carry content.
pub(super) fn stderr_apart(
    upstreams: &[super::UpstreamConfig],
    audit_sink: &str,
) -> Result<(), String> {
    const OWN: [&str; 6] = [
        "/dev/stderr",
        "/dev/stdout",
        "/proc/self/fd/1",
        "/proc/self/fd/2",
        "/dev/fd/1",
        "/dev/fd/2",
    ];
    for u in upstreams {
        if let Some(StdioConfig {
            stderr: Stderr::File(p),
            ..
        }) = &u.stdio
        {
            let shown = p.display().to_string();
            if shown == audit_sink || OWN.contains(&shown.as_str()) {
                return Err(format!(
                    "upstream {:?}: stderr = \"file:{shown}\" is the audit log or Sluice's own output; a server's stderr may carry content: give it a file of its own or \"drop\"",
                    u.name
                ));
            }
        }
    }
    Ok(())
}

/// The stdio keys of one `[[upstream]]` as written.
#[derive(Debug, Default)]
pub(super) struct RawStdio {
    pub(super) command: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) cwd: Option<String>,
    pub(super) stderr: Option<String>,
    pub(super) stderr_max_bytes: Option<u64>,
    pub(super) max_processes: Option<usize>,
    pub(super) spare_processes: Option<usize>,
    pub(super) start_ms: Option<u64>,
    pub(super) user: Option<RawId>,
    pub(super) group: Option<RawId>,
    pub(super) max_processes_per_principal: Option<usize>,
    pub(super) inherit_env: Option<bool>,
    pub(super) inherit: Vec<String>,
    pub(super) idle_ms: Option<u64>,
    /// `[auth]` configures no credentials: every caller is `local`, so the default share is
    /// the whole of `max_processes`.
    pub(super) one_principal: bool,
}

impl RawStdio {
    /// The stdio keys, as a refusal next to a `url` lists them.
    pub(super) const KEYS: &'static str = "env, inherit_env, inherit, idle_ms, cwd, stderr, stderr_max_bytes, max_processes, max_processes_per_principal, spare_processes, start_ms, user and group";

    /// Whether `u` sets any stdio key (refused next to a `url`).
    pub(super) fn any_on(u: &RawUpstream) -> bool {
        let set = [
            u.cwd.is_some(),
            u.stderr.is_some(),
            u.stderr_max_bytes.is_some(),
            u.max_processes.is_some(),
            u.max_processes_per_principal.is_some(),
            u.spare_processes.is_some(),
            u.start_ms.is_some(),
            u.idle_ms.is_some(),
            u.inherit_env.is_some(),
            !u.inherit.is_empty(),
            !u.env.is_empty(),
            u.user.is_some() || u.group.is_some(),
        ];
        set.iter().any(|k| *k)
    }

    /// The stdio keys of `u`, taken out of it, with its `command`.
    pub(super) fn take(u: &mut RawUpstream, command: Vec<String>, one_principal: bool) -> RawStdio {
        RawStdio {
            command,
            env: std::mem::take(&mut u.env).into_iter().collect(),
            cwd: u.cwd.take(),
            stderr: u.stderr.take(),
            stderr_max_bytes: u.stderr_max_bytes,
            max_processes: u.max_processes,
            spare_processes: u.spare_processes,
            start_ms: u.start_ms,
            user: u.user.take(),
            group: u.group.take(),
            max_processes_per_principal: u.max_processes_per_principal,
            inherit_env: u.inherit_env,
            inherit: std::mem::take(&mut u.inherit),
            idle_ms: u.idle_ms,
            one_principal,
        }
    }

    /// Checks the keys of upstream `name` (`at` names the line or the flag in errors).
    pub(super) fn check(self, name: &str, at: &str) -> Result<StdioConfig, ConfigError> {
        let bad = |what: String| ConfigError(format!("{at}: upstream {name:?}: {what}"));
        self.check_command(bad)?;
        let stderr = stderr(self.stderr.as_deref(), bad)?;
        inherit::check_patterns(&self.inherit, bad)?;
        let (max_processes, share, spare_processes) = self.processes(bad)?;
        let stderr_max_bytes = self.stderr_max_bytes.unwrap_or(10 << 20);
        if stderr_max_bytes == 0 {
            return Err(bad(
                "stderr_max_bytes = 0: give a size, or stderr = \"drop\"".into(),
            ));
        }
        let start_ms = self.start_ms.unwrap_or(30_000);
        if !(1..=MAX_START_MS).contains(&start_ms) {
            return Err(bad(format!("start_ms = {start_ms}: give 1 to {MAX_START_MS} (how long its server may take to boot)")));
        }
        let idle_ms = self.idle_ms.unwrap_or(DEFAULT_IDLE_MS);
        if !(1..=MAX_IDLE_MS).contains(&idle_ms) {
            return Err(bad(format!(
                "idle_ms = {idle_ms}: give 1 to {MAX_IDLE_MS} (how long an unused process is kept)"
            )));
        }
        let (user, group) = self.run_as(bad)?;
        Ok(StdioConfig {
            command: self.command,
            env: self.env,
            inherit_env: self.inherit_env.unwrap_or(true),
            inherit: self.inherit,
            secret_env: Vec::new(),
            idle: std::time::Duration::from_millis(idle_ms),
            cwd: self.cwd.map(PathBuf::from),
            stderr,
            stderr_max_bytes,
            max_processes,
            max_processes_per_principal: share,
            spare_processes,
            start: std::time::Duration::from_millis(start_ms),
            user,
            group,
        })
    }

    /// Refuses an empty command or program, a NUL in the command, and an `env` name that is
    /// empty or holds `=` or NUL (or a value holding NUL).
    fn check_command(&self, bad: impl Fn(String) -> ConfigError) -> Result<(), ConfigError> {
        match self.command.first() {
            None => return Err(bad("command is empty: give the program and its arguments, e.g. [\"npx\", \"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv\"]".into())),
            Some(p) if p.trim().is_empty() => return Err(bad("command's program (its first item) is empty".into())),
            Some(_) => {}
        }
        if self.command.iter().any(|a| a.contains('\0')) {
            return Err(bad("command holds a NUL byte".into()));
        }
        if let Some((k, _)) = self
            .env
            .iter()
            .find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
        {
            return Err(bad(format!(
                "env name {k:?} is not a usable variable name (empty, or holding '=' or NUL)"
            )));
        }
        Ok(())
    }

    /// `max_processes`, `max_processes_per_principal` (of it) and `spare_processes` (at most
    /// it), each defaulted and bounded.
    fn processes(
        &self,
        bad: impl Fn(String) -> ConfigError,
    ) -> Result<(usize, usize, usize), ConfigError> {
        let max_processes = self.max_processes.unwrap_or(DEFAULT_MAX_PROCESSES);
        if max_processes == 0 || max_processes > MAX_PROCESSES {
            return Err(bad(format!(
                "max_processes = {max_processes}: give 1 to {MAX_PROCESSES}"
            )));
        }
        let share = self
            .max_processes_per_principal
            .unwrap_or(if self.one_principal {
                max_processes
            } else {
                (max_processes / 4).max(1)
            });
        if share == 0 || share > max_processes {
            return Err(bad(format!(
                "max_processes_per_principal = {share}: give 1 to max_processes = {max_processes} (the processes one principal may hold)"
            )));
        }
        let spare_processes = self.spare_processes.unwrap_or(1).min(max_processes);
        if self.spare_processes.is_some_and(|n| n > max_processes) {
            return Err(bad(format!(
                "spare_processes = {} is more than max_processes = {max_processes}",
                self.spare_processes.unwrap_or(0)
            )));
        }
        Ok((max_processes, share, spare_processes))
    }

    /// The `user` and `group` its processes run as, resolved in the user database (the group
    /// first: a user's primary group is not needed when one is given).
    fn run_as(
        &self,
        bad: impl Fn(String) -> ConfigError + Copy,
    ) -> Result<(Option<RunUser>, Option<RunGroup>), ConfigError> {
        let group = self
            .group
            .as_ref()
            .map(run_as::resolve_group)
            .transpose()
            .map_err(bad)?;
        let user = self
            .user
            .as_ref()
            .map(|u| run_as::resolve_user(u, group.is_some()))
            .transpose()
            .map_err(bad)?;
        Ok((user, group))
    }

    /// `stdio:COMMAND ARGS` (or `stdio@USER:COMMAND ARGS`, run as USER) of `--upstream`, given
    /// what follows `stdio`; the command split as a POSIX shell would (quotes, escapes), with
    /// no shell run.
    pub(super) fn from_flag(spec: &str, after_stdio: &str) -> Result<RawStdio, ConfigError> {
        // The command is not echoed: its arguments may hold credentials.
        let name = spec.split_once('=').map_or(spec, |(n, _)| n);
        let (user, words) = match after_stdio
            .strip_prefix('@')
            .and_then(|r| r.split_once(':'))
        {
            Some((user, words)) => (Some(RawId::Text(user.to_owned())), words),
            None => (None, after_stdio.strip_prefix(':').unwrap_or(after_stdio)),
        };
        let command = shlex::split(words)
            .ok_or_else(|| ConfigError(format!("--upstream {name}=stdio:…: the command has an unclosed quote or a trailing backslash")))?;
        Ok(RawStdio {
            command,
            user,
            ..RawStdio::default()
        })
    }
}
