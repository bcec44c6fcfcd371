#!/usr/bin/env python3
"""The conformance suite's client command for the `auth/client-credentials-*` scenarios, with
Sluice as the OAuth client (`[upstream.auth] mode = "client_credentials"`).

`conformance client --command "python3 tests/conformance/oauth_client_credentials.py"` runs it
with the scenario's MCP server URL as the last argument and the client's credentials in
`MCP_CONFORMANCE_CONTEXT` (a secret, or for `auth/client-credentials-jwt` a private key that
signs the client assertion). It starts the Sluice binary at `$SLUICE_BIN` in front of that server
(the secret in an environment variable, logs at trace level), lists tools and calls `test-tool`
through Sluice as a 2026-07-28 client, then stops Sluice and reads its log: exit 0 only when the
call came back and no secret and no token is in any log line. With `SLUICE_AUTH_WRONG_SECRET=1`
it gives Sluice a wrong secret instead and exits 0 only when Sluice logs the authorization
server's refusal (`invalid_client`), naming the upstream and holding no secret. Standard library
only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from sluice_driver import WAIT, endpoint, line_with, post, start


def main() -> int:
    url = sys.argv[-1]
    ctx = json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"])
    wrong = os.environ.get("SLUICE_AUTH_WRONG_SECRET") == "1"
    secret = ctx.get("client_secret", "") + ("-wrong" if wrong else "")
    work = tempfile.mkdtemp(prefix="sluice-oauth-")
    if "private_key_pem" in ctx:
        # auth/client-credentials-jwt: a key that signs the client assertion, no secret.
        key_path = os.path.join(work, "client-key.pem")
        with open(key_path, "w", encoding="utf-8") as f:
            f.write(ctx["private_key_pem"])
        proof = (
            'token_endpoint_auth = "private_key_jwt"\n'
            f"private_key_file = {json.dumps(key_path)}\n"
            f"signing_alg = {json.dumps(ctx.get('signing_algorithm', 'ES256'))}\n"
        )
        secret = "PRIVATE KEY"
    else:
        proof = 'client_secret_env = "SCENARIO_CLIENT_SECRET"\n'
    config = (
        'listen = "127.0.0.1:0"\n\n[[upstream]]\nname = "scenario"\n'
        f"url = {json.dumps(url)}\n\n[upstream.auth]\n"
        'mode = "client_credentials"\n'
        f"client_id = {json.dumps(ctx['client_id'])}\n" + proof
    )
    proc, log_path = start(config, work, {"SCENARIO_CLIENT_SECRET": secret})
    try:
        base = endpoint(log_path, proc)
        if wrong:
            # The line where Sluice says it got no token.
            line = line_with(log_path, proc, "no token for the upstream")
            expected = "upstream 'scenario' could not be authorized: its token endpoint refused the client credentials: invalid_client (HTTP 401)"
            if expected not in line or secret in line:
                print(f"unexpected refusal line: {line[:400]}", file=sys.stderr)
                return 1
            # The upstream is down for that reason: a client is told so (503, -31030), by name.
            answer = post(base, "tools/call", {"name": "scenario__test-tool", "arguments": {}})
            told = json.dumps(answer)
            error = answer.get("error", {})
            if (
                answer.get("status") != 503
                or error.get("code") != -31030
                or expected not in error.get("message", "")
                or secret in told
            ):
                print(f"the client was told: {told[:600]}", file=sys.stderr)
                return 1
            print("refused as expected: invalid_client")
            return 0
        tool = None
        deadline = time.monotonic() + WAIT
        while tool is None and time.monotonic() < deadline:
            tools = post(base, "tools/list", {}).get("result", {}).get("tools", [])
            tool = next((t["name"] for t in tools if t["name"].endswith("test-tool")), None)
            if tool is None:
                time.sleep(0.1)
        if tool is None:
            print("no test-tool listed through Sluice", file=sys.stderr)
            return 1
        answer = post(base, "tools/call", {"name": tool, "arguments": {}})
        result = answer.get("result", {})
        if result.get("isError") or not result.get("content"):
            print(f"the call through Sluice failed: {json.dumps(answer)[:500]}", file=sys.stderr)
            return 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if wrong:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                if secret in f.read():
                    print("Sluice's log holds the secret", file=sys.stderr)
                    sys.exit(1)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    leaks = [w for w in (secret, "cc-token-", "Basic ", "eyJhbGci") if w in text]
    if leaks:
        print(f"Sluice's trace log holds a credential ({len(leaks)} kinds)", file=sys.stderr)
        return 1
    print(f"called {tool} through Sluice; trace log of {len(text)} bytes holds no credential")
    return 0


if __name__ == "__main__":
    sys.exit(main())
