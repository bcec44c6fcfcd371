#!/usr/bin/env python3
"""The conformance suite's client command for its authorization scenarios (`auth/*`), with
Sluice as the OAuth client of the suite's server (`[upstream.auth] mode = "oauth"`), each user
signing in through MCP itself.

`conformance client --command "python3 tests/conformance/oauth_user.py"` runs it with the
scenario's MCP server URL as the last argument (and, for `auth/pre-registration`, the client's
registration in `MCP_CONFORMANCE_CONTEXT`). It starts the Sluice binary at `$SLUICE_BIN` in
front of that server (logs at trace level), then acts as a 2026-07-28 MCP client that declared
URL elicitation, and as that client's user:

1. it calls the scenario's tool through Sluice and gets a sign-in round: an `input_required`
   result whose one input request is a URL-mode `elicitation/create`;
2. it opens that URL like a browser: the suite's authorization server redirects at once to
   Sluice's callback, which it follows;
3. it answers the round (`accept`) and retries the call, which Sluice now sends with the
   user's token.

Exit 0 only when the retried call came back with the tool's result and no token, code,
verifier or secret is in any line of Sluice's trace log. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import urllib.error
import urllib.request

import sluice_driver as driver

CIMD = "https://conformance-test.local/client-metadata.json"
CAPS = {"elicitation": {"url": {}}}


def post(base: str, method: str, params: dict, caps: dict | None = None) -> dict:
    return driver.post(base, method, params, CAPS if caps is None else caps)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: D102
        return None


def browse(url: str) -> tuple[int, str]:
    """GETs `url`, following redirects one at a time (a browser would): the last status and
    page."""
    opener = urllib.request.build_opener(NoRedirect)
    for _ in range(5):
        try:
            with opener.open(url, timeout=15) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            if e.code in (301, 302, 303, 307, 308) and e.headers.get("Location"):
                url = e.headers["Location"]
                continue
            return e.code, e.read().decode("utf-8", "replace")
    return 0, "too many redirects"


def config(url: str, ctx: dict) -> str:
    auth = 'mode = "oauth"\n'
    if os.environ.get("MCP_CONFORMANCE_SCENARIO") == "auth/basic-cimd":
        auth += f"client_metadata_url = {json.dumps(CIMD)}\n"
    if "client_id" in ctx:
        auth += f"client_id = {json.dumps(ctx['client_id'])}\n"
        if ctx.get("client_secret"):
            auth += 'client_secret_env = "SCENARIO_CLIENT_SECRET"\n'
        else:
            auth += 'token_endpoint_auth = "none"\n'
    # SLUICE_PREFIX=always: tool names carry the upstream's prefix (as with several upstreams).
    prefix = f'prefix = "{os.environ["SLUICE_PREFIX"]}"\n' if os.environ.get("SLUICE_PREFIX") else ""
    return (
        f'listen = "127.0.0.1:0"\n{prefix}\n[[upstream]]\nname = "scenario"\n'
        f"url = {json.dumps(url)}\n\n[upstream.auth]\n{auth}"
    )


def tool(base: str, suffix: str) -> str | None:
    tools = post(base, "tools/list", {}).get("result", {}).get("tools", [])
    return next((t["name"] for t in tools if t["name"].endswith(suffix)), None)


def answer_rounds(base: str, call: dict) -> dict:
    """Calls, then answers each sign-in round the way a user would (at most three)."""
    answer = post(base, "tools/call", call)
    for _ in range(3):
        result = answer.get("result", {})
        if result.get("resultType") != "input_required":
            break
        ask = result["inputRequests"]["sluice_sign_in"]["params"]
        if ask.get("mode") != "url":
            raise SystemExit(f"not a URL elicitation: {json.dumps(ask)[:300]}")
        status, page = browse(ask["url"])
        print(f"sign-in page: {status} {page.strip()[:200]}")
        retry = {
            **call,
            "inputResponses": {"sluice_sign_in": {"action": "accept"}},
            "requestState": result["requestState"],
        }
        answer = post(base, "tools/call", retry)
    return answer


def sign_in_and_call(base: str) -> int:
    # Signed out, the upstream lists one tool: the sign-in.
    sign_in = tool(base, "sluice_sign_in")
    if sign_in is None:
        print("no sign-in tool listed through Sluice", file=sys.stderr)
        return 1
    call = {"name": sign_in, "arguments": {}}
    # A client that cannot open a URL for its user is told the URL in a -31040 error.
    told = post(base, "tools/call", call, caps={})
    error = told.get("error", {})
    if error.get("code") != -31040 or not error.get("data", {}).get("url", "").startswith("http"):
        print(f"a client without URL elicitation was told: {json.dumps(told)[:400]}", file=sys.stderr)
        return 1
    # A user who declines is not signed in, and nothing reaches the upstream.
    asked = post(base, "tools/call", call)["result"]
    declined = post(
        base,
        "tools/call",
        {**call, "inputResponses": {"sluice_sign_in": {"action": "decline"}},
         "requestState": asked["requestState"]},
    )
    if declined.get("error", {}).get("code") != -31041:
        print(f"a declined sign-in was answered: {json.dumps(declined)[:400]}", file=sys.stderr)
        return 1
    print("without URL elicitation: -31040 with the URL; declined: -31041")
    answer = answer_rounds(base, call)
    print(f"sign-in tool: {json.dumps(answer.get('result', answer))[:300]}")
    # Signed in, the upstream's own tools are listed.
    name = tool(base, "test-tool")
    if name is None:
        print("no test-tool listed through Sluice after signing in", file=sys.stderr)
        return 1
    # A call the upstream wants more scope for is answered with another sign-in (step-up).
    answer = answer_rounds(base, {"name": name, "arguments": {}})
    result = answer.get("result", {})
    if result.get("isError") or not result.get("content"):
        print(f"the call through Sluice failed: {json.dumps(answer)[:600]}", file=sys.stderr)
        return 1
    print(f"called {name} through Sluice as the signed-in user (signed in with {sign_in})")
    return 0


def main() -> int:
    url = sys.argv[-1]
    ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    work = tempfile.mkdtemp(prefix="sluice-oauth-user-")
    secret = ctx.get("client_secret") or ""
    proc, log_path = driver.start(config(url, ctx), work, {"SCENARIO_CLIENT_SECRET": secret})
    try:
        code = sign_in_and_call(driver.endpoint(log_path, proc))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    words = ["test-token-", "test-auth-code", "code_verifier", "Bearer test", "Basic "]
    leaks = [w for w in words + ([secret] if secret else []) if w in text]
    if leaks:
        print(f"Sluice's trace log holds a credential: {leaks}", file=sys.stderr)
        return 1
    print(f"trace log of {len(text)} bytes holds no credential")
    # The audit log names the auth mode and that a sign-in was asked, not a token.
    records = [json.loads(line) for line in text.splitlines() if line.startswith('{"time_ms"')]
    asked = [r for r in records if r.get("decision") == "sign_in"]
    if asked and all(r.get("upstream_auth") == "oauth" for r in asked):
        print(f"audit: {len(asked)} sign-in records, upstream_auth oauth")
    return code


if __name__ == "__main__":
    sys.exit(main())
