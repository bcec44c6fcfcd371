//! The README's quick start and its "Connect your client" section, run as written (issue 29).
//!
//! Each fenced block of the README tagged `connect:NAME` (and the `serve --upstream` line of
//! the quick start) is read from README.md itself, so a snippet that stops working, or a README
//! edit that breaks one, fails here. The only changes made to a snippet before it runs: the
//! address `127.0.0.1:8080` becomes the test's Sluice, `npx -y PKG@VER` becomes the pinned
//! package `scripts/peers.sh` installed (the README must name the very version installed), and a
//! placeholder key becomes the test's key. Real clients: the MCP Inspector CLI
//! (`@modelcontextprotocol/inspector@2.12.0`, over Streamable HTTP and the 2024-11-05 HTTP+SSE
//! transport), `mcp-remote@0.15.1` (the bridge Claude Desktop
//! uses) driven by the Inspector over stdio, the Python SDK (`mcp==2.3.0`) and the TypeScript SDK
//! (`@modelcontextprotocol/sdk@1.32.2`). Claude Code, VS Code and Cursor cannot run here: their
//! snippets are parsed and the URL and headers they would send are used by the Inspector, the
//! same Streamable HTTP those hosts speak.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::peers::peer_env;
use crate::support::process::{Env, Sluice};

const KEY: &str = "connect-test-key-0123456789abcdef";
const README_ADDR: &str = "127.0.0.1:8080";

/// The README's fenced blocks whose info string is `LANG connect:NAME`, by name.
fn snippets() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let mut out = Vec::new();
    let mut lines = readme.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l
            .strip_prefix("```")
            .and_then(|info| info.split_whitespace().nth(1))
            .and_then(|t| t.strip_prefix("connect:"))
        else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        out.push((name.to_owned(), body.join("\n") + "\n"));
    }
    out
}

fn snippet(name: &str) -> String {
    let all = snippets();
    all.iter()
        .find(|(n, _)| n == name)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| {
            panic!(
                "README.md has no ```… connect:{name} block (found: {:?})",
                all.iter().map(|(n, _)| n).collect::<Vec<_>>()
            )
        })
}

/// `npx -y PKG@VER` of a snippet, as the command that runs the pinned install.
fn node_of(pkg: &str, var: &str) -> (String, String) {
    (
        format!("npx -y {pkg}"),
        format!(
            "{} {}",
            peer_env("SLUICE_NODE22").display(),
            peer_env(var).display()
        ),
    )
}

/// A Sluice with the README's API-key auth in front of server-filesystem over stdio.
async fn sluice(dir: &std::path::Path) -> Sluice {
    let node = peer_env("SLUICE_NODE22");
    let fs = peer_env("SLUICE_FILESYSTEM");
    let config = format!(
        "listen = \"127.0.0.1:0\"\n[[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n\n[[upstream]]\nname = \"files\"\ncommand = [{:?}, {:?}, {:?}]\n",
        sluice::auth::api_keys::hash_key(KEY),
        node.display(),
        fs.display(),
        dir.display()
    );
    Sluice::start_env(&config, &Env::new()).await
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = crate::support::peers::scratch().join(name);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(dir.join("hello.txt"), "hello from the connect test\n").expect("a file to list");
    dir
}

/// Runs `sh -c script` with the key in `SLUICE_API_KEY`; gives stdout, failing on a non-zero exit.
async fn sh(label: &str, script: &str) -> String {
    let run = tokio::process::Command::new("sh")
        .args(["-c", script])
        .env("SLUICE_API_KEY", KEY)
        .env("HOME", crate::support::peers::scratch())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), run)
        .await
        .unwrap_or_else(|_| panic!("{label}: no end within 90 s"));
    let out = out.unwrap_or_else(|e| panic!("{label}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{label} failed ({}):\n{script}\n--- stdout\n{stdout}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn quoted(s: &str) -> String {
    shlex::try_quote(s).expect("no NUL").into_owned()
}

/// The Inspector CLI against `url` with `headers`, listing tools and calling `list_directory`.
async fn inspector_http(
    label: &str,
    url: &str,
    headers: &[(String, String)],
    dir: &std::path::Path,
) {
    let (_, inspector) = node_of("", "SLUICE_INSPECTOR");
    let hs: String = headers
        .iter()
        .map(|(k, v)| format!(" --header {}", quoted(&format!("{k}: {v}"))))
        .collect();
    let list = sh(
        label,
        &format!("{inspector} --cli {url} --transport http{hs} --method tools/list"),
    )
    .await;
    assert!(
        list.contains("list_directory"),
        "{label}: tools/list through Sluice:\n{list}"
    );
    let call = format!(
        "{inspector} --cli {url} --transport http{hs} --method tools/call --tool-name list_directory --tool-arg path={}",
        dir.display()
    );
    let called = sh(label, &call).await;
    assert!(
        called.contains("hello.txt"),
        "{label}: tools/call through Sluice:\n{called}"
    );
}

/// The address of a `sluice serve` from its "sluice listening addr=…" line (its log drained after).
async fn listening_addr(child: &mut tokio::process::Child) -> String {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let find = async {
        while let Some(l) = lines.next_line().await.expect("read its log") {
            if let Some(rest) = l
                .split("addr=")
                .nth(1)
                .filter(|_| l.contains("sluice listening"))
            {
                return rest
                    .split_whitespace()
                    .next()
                    .expect("an address")
                    .to_owned();
            }
        }
        panic!("sluice exited before listening");
    };
    let addr = tokio::time::timeout(std::time::Duration::from_secs(10), find)
        .await
        .expect("sluice listens within 10 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    addr
}

#[tokio::test]
async fn the_quick_start_serves_a_stdio_server_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| {
            l.contains(
                "serve --upstream 'files=stdio:npx -y @modelcontextprotocol/server-filesystem",
            )
        })
        .expect("the quick start's stdio line in README.md");
    let words = shlex::split(line.split('#').next().unwrap()).expect("a shell line");
    let spec = words
        .iter()
        .find(|w| w.starts_with("files=stdio:"))
        .expect("the --upstream value");
    let dir = scratch_dir("quick-start");
    let (npx, node) = node_of(
        "@modelcontextprotocol/server-filesystem",
        "SLUICE_FILESYSTEM",
    );
    let spec = spec
        .replace(&npx, &node)
        .replace("/srv/data", &dir.display().to_string());
    assert!(
        !spec.contains("npx"),
        "the quick start names another package than the one installed: {spec}"
    );
    let bin = env!("CARGO_BIN_EXE_sluice");
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream", &spec])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start sluice");
    let addr = listening_addr(&mut child).await;
    inspector_http("quick start", &format!("http://{addr}/mcp"), &[], &dir).await;
    let _ = child.kill().await;
}

#[tokio::test]
async fn the_inspector_snippet_lists_and_calls_through_sluice() {
    inspector_snippet("inspector").await;
}

/// The Inspector on the 2024-11-05 HTTP+SSE transport, at the `/sse` the README names.
#[tokio::test]
async fn the_inspector_sse_snippet_lists_through_sluice_over_the_old_transport() {
    inspector_snippet("inspector-sse").await;
}

/// Runs the README's Inspector snippet `name` with the key and without it.
async fn inspector_snippet(name: &str) {
    let dir = scratch_dir(name);
    let s = sluice(&dir).await;
    let (npx, node) = node_of("@modelcontextprotocol/inspector@2.12.0", "SLUICE_INSPECTOR");
    let text = snippet(name)
        .replace("\\\n", " ")
        .replace(&npx, &node)
        .replace(README_ADDR, &s.addr);
    assert!(
        !text.contains("npx"),
        "the snippet names another Inspector than the one installed:\n{text}"
    );
    let out = sh(&format!("the {name} snippet"), &text).await;
    assert!(out.contains("list_directory"), "{out}");
    // Without the key the Inspector is refused (it then asks for an interactive OAuth login on
    // any 401, whatever the server advertises: see Troubleshooting).
    let refused = tokio::process::Command::new("sh")
        .args(["-c", &text])
        .env("HOME", crate::support::peers::scratch())
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success(), "no key, yet served");
    s.terminate().await;
}

#[tokio::test]
async fn the_mcp_remote_config_of_claude_desktop_works_as_written() {
    let dir = scratch_dir("mcp-remote");
    let s = sluice(&dir).await;
    let cfg: Value = serde_json::from_str(&snippet("mcp-remote")).expect("the snippet is JSON");
    let server = &cfg["mcpServers"]["sluice"];
    assert_eq!(server["command"], "npx");
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace(README_ADDR, &s.addr))
        .collect();
    assert_eq!(
        args[..2],
        ["-y", "mcp-remote@0.15.1"],
        "the README pins the mcp-remote scripts/peers.sh installs"
    );
    let (_, remote) = node_of("", "SLUICE_MCP_REMOTE");
    let (_, inspector) = node_of("", "SLUICE_INSPECTOR");
    // The host starts `command args` with `env`: here the Inspector does, as a stdio client
    // (after `--`, so mcp-remote's own `--header` is not taken for the Inspector's).
    let env: String = server["env"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| format!(" -e {k}={KEY}"))
        .collect();
    let target: String = args[2..]
        .iter()
        .map(|a| format!(" {}", quoted(a)))
        .collect();
    let list = sh(
        "mcp-remote",
        &format!("{inspector} --cli{env} --method tools/list -- {remote}{target}"),
    )
    .await;
    assert!(
        list.contains("list_directory"),
        "tools/list through mcp-remote and Sluice:\n{list}"
    );
    s.terminate().await;
}

/// A JSON host config's server entry: its URL and its headers with the key put in.
fn url_and_headers(server: &Value, addr: &str) -> (String, Vec<(String, String)>) {
    let url = server["url"]
        .as_str()
        .expect("a url")
        .replace(README_ADDR, addr);
    let headers = server["headers"].as_object().map_or_else(Vec::new, |h| {
        h.iter()
            .map(|(k, v)| {
                let v = v
                    .as_str()
                    .unwrap()
                    .replace("${input:sluice-key}", KEY)
                    .replace("${env:SLUICE_API_KEY}", KEY);
                assert!(
                    !v.contains("${"),
                    "a placeholder the test does not know: {v}"
                );
                (k.clone(), v)
            })
            .collect()
    });
    (url, headers)
}

#[tokio::test]
async fn the_claude_code_vscode_and_cursor_snippets_name_a_url_and_headers_sluice_serves() {
    let dir = scratch_dir("hosts");
    let s = sluice(&dir).await;
    let words = shlex::split(snippet("claude-code").trim()).expect("a shell line");
    assert_eq!(
        words[..5],
        ["claude", "mcp", "add", "--transport", "http"],
        "{words:?}"
    );
    let url = words[6].replace(README_ADDR, &s.addr);
    let header = words[words
        .iter()
        .position(|w| w == "--header")
        .expect("--header")
        + 1]
    .replace("$SLUICE_API_KEY", KEY);
    let (k, v) = header.split_once(": ").expect("Name: value");
    inspector_http(
        "Claude Code's URL and header",
        &url,
        &[(k.into(), v.into())],
        &dir,
    )
    .await;
    let vscode: Value =
        serde_json::from_str(&snippet("vscode")).expect("VS Code's mcp.json is JSON");
    assert_eq!(vscode["servers"]["sluice"]["type"], "http");
    let (url, headers) = url_and_headers(&vscode["servers"]["sluice"], &s.addr);
    inspector_http("VS Code's URL and headers", &url, &headers, &dir).await;
    let cursor: Value =
        serde_json::from_str(&snippet("cursor")).expect("Cursor's mcp.json is JSON");
    let (url, headers) = url_and_headers(&cursor["mcpServers"]["sluice"], &s.addr);
    inspector_http("Cursor's URL and headers", &url, &headers, &dir).await;
    s.terminate().await;
}

#[tokio::test]
async fn the_python_and_typescript_sdk_snippets_list_tools_through_sluice() {
    let dir = scratch_dir("sdks");
    let s = sluice(&dir).await;
    let py = crate::support::peers::scratch().join("connect.py");
    std::fs::write(&py, snippet("python").replace(README_ADDR, &s.addr)).unwrap();
    let out = sh(
        "the Python snippet",
        &format!("{} {}", peer_env("SLUICE_PY2").display(), py.display()),
    )
    .await;
    assert!(out.contains("list_directory"), "{out}");
    // An ES module resolves packages from its own folder up: it sits beside the SDK's node_modules.
    let sdk = peer_env("SLUICE_TS_SDK1");
    let js = sdk
        .parent()
        .unwrap()
        .join(format!("connect-{}.mjs", std::process::id()));
    std::fs::write(&js, snippet("typescript").replace(README_ADDR, &s.addr)).unwrap();
    let out = sh(
        "the TypeScript snippet",
        &format!("{} {}", peer_env("SLUICE_NODE22").display(), js.display()),
    )
    .await;
    let _ = std::fs::remove_file(&js);
    assert!(out.contains("list_directory"), "{out}");
    s.terminate().await;
}
