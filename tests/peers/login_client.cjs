// An MCP host signing in to Sluice's `[auth.login]` (issue 32) with the official TypeScript SDK
// (npm @modelcontextprotocol/sdk@1.32.2): its `StreamableHTTPClientTransport` with an OAuth
// `authProvider` (in memory), so the SDK itself reads the 401's resource metadata, Sluice's
// authorization server metadata, registers (Dynamic Client Registration), and sends the user to
// the authorization URL with PKCE S256. The browser step is done here as a browser would: follow
// redirects, keep cookies per origin, answer Sluice's consent form ("Continue") and the IdP's
// sign-in and consent forms (tests/peers/idp.mjs, any login name is a user), until the browser is
// sent to the client's redirect URI; the code is then given to `transport.finishAuth`.
//
// Takes one argument, a JSON plan:
//   {"url": "http://127.0.0.1:PORT/mcp", "user": "alice", "tool": "NAME", "arguments": {...},
//    "replay": true}
// Then connects again with the token, lists tools and calls `tool`. With `"reveal": true` the
// summary's `tokens` holds the access and refresh tokens (for a test that goes on with them). With `replay`, it also
// refreshes once with the refresh token (a new pair), presents the rotated one again (refused),
// and then the new one (refused too: the family is revoked).
//
// Or, with {"browse": URL, "user": "bob", "until": "http://127.0.0.1:PORT/callback"}, only the
// browser step: from URL until the browser is sent to `until`, which it then opens (the
// conformance suite's callback server); prints `SUMMARY` with `steps` and `failures` only.
//
// Or, with {"remote": "<mcp-remote's proxy.js>", "callbackPort": N, "configDir": DIR, "url",
// "user", "tool", "arguments"}: mcp-remote (what Claude Desktop runs) between this client and
// Sluice, over stdio, started by the SDK's `StdioClientTransport`; mcp-remote signs in itself
// (it prints the authorization URL on its stderr, and its browser launch finds no display),
// the browser step follows that URL until mcp-remote's callback, which it then opens; the client
// lists the tools and calls `tool` through mcp-remote.
//
// Prints one line `SUMMARY {...}`: `steps` (what happened, in order), `token` (the `iss`, `aud`,
// `sub` and `groups` of Sluice's access token), `tools`, `text` (the call's
// text), `refresh` (the statuses and error codes of the three refreshes), `failures`, and
// `canaries`: every code, token, verifier and cookie value of the sign-in (the IdP's code to
// Sluice, Sluice's code, the PKCE verifier, the consent cookie, the access and refresh tokens),
// for the test to check none is in Sluice's output. Exits 0 only without failures.
//
// Run by hand:  NODE_PATH=$SLUICE_TS_SDK1 $SLUICE_NODE22 tests/peers/login_client.cjs '{"url": "...", ...}'
'use strict';
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { UnauthorizedError } = require('@modelcontextprotocol/sdk/client/auth.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const plan = JSON.parse(process.argv[2]);
const summary = { steps: [], tools: [], text: null, refresh: [], failures: [], canaries: [] };
const REDIRECT = 'http://127.0.0.1:1/callback';

class Provider {
  constructor() {
    this.info = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.sentTo = undefined;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: 'Sluice login test host',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() { return 'state-from-the-host'; }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; summary.steps.push('registered'); }
  tokens() { return this.saved; }
  saveTokens(t) { this.saved = t; summary.steps.push('tokens saved'); }
  redirectToAuthorization(url) { this.sentTo = url; summary.steps.push('sent to authorize'); }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

// A browser: cookies per origin, redirects followed, forms answered.
const jars = new Map();
function jar(url) {
  const origin = new URL(url).origin;
  if (!jars.has(origin)) jars.set(origin, new Map());
  return jars.get(origin);
}
async function visit(url, init = {}) {
  const j = jar(url);
  const cookie = [...j].map(([k, v]) => `${k}=${v}`).join('; ');
  const res = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers || {}), cookie } });
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const at = pair.indexOf('=');
    j.set(pair.slice(0, at).trim(), pair.slice(at + 1));
  }
  return res;
}

async function browse(start, user, until = REDIRECT) {
  let res = await visit(start);
  let at = start;
  for (let step = 0; step < 20; step += 1) {
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location'), at).href;
      const idpCode = new URL(next).searchParams.get('code');
      if (idpCode) summary.canaries.push(idpCode);
      if (next.startsWith(until)) return new URL(next);
      at = next;
      res = await visit(next);
      continue;
    }
    const html = await res.text();
    if (res.status !== 200) throw new Error(`${new URL(at).origin} answered ${res.status}: ${html.slice(0, 400)}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(html);
    if (!action) throw new Error(`no form at ${at}: ${html.slice(0, 300)}`);
    const form = new URLSearchParams();
    for (const m of html.matchAll(/<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) form.set(m[1], m[2]);
    if (/name="decision"/.test(html)) {
      form.set('decision', 'allow');
      summary.steps.push('consented at Sluice');
    }
    if (/name="login"/.test(html)) {
      form.set('login', user);
      form.set('password', 'any');
      summary.steps.push('signed in at the IdP');
    }
    at = new URL(action[1].replace(/&amp;/g, '&'), at).href;
    res = await visit(at, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() });
  }
  throw new Error('the browser was not sent back within 20 steps');
}

async function connect(provider) {
  const transport = new StreamableHTTPClientTransport(new URL(plan.url), { authProvider: provider });
  const client = new Client({ name: 'login-test-host', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

async function refresh(provider, token) {
  const meta = await (await fetch(new URL('/.well-known/oauth-authorization-server', plan.url))).json();
  const res = await fetch(meta.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: provider.info.client_id }),
  });
  const body = await res.json();
  if (body.access_token) summary.canaries.push(body.access_token, body.refresh_token);
  summary.refresh.push({ status: res.status, error: body.error || null, rotated: Boolean(body.refresh_token && body.refresh_token !== token) });
  return body.refresh_token;
}

// mcp-remote over stdio: its sign-in driven from the URL it prints.
async function remote() {
  const callback = `http://127.0.0.1:${plan.callbackPort}/oauth/callback`;
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [plan.remote, plan.url, String(plan.callbackPort), '--host', '127.0.0.1'],
    env: { ...process.env, MCP_REMOTE_CONFIG_DIR: plan.configDir, DISPLAY: '', WAYLAND_DISPLAY: '', BROWSER: 'true' },
    stderr: 'pipe',
  });
  let err = '';
  const signedIn = new Promise((resolve, reject) => {
    transport.stderr.on('data', (chunk) => {
      err += chunk.toString();
      const m = /Please authorize this client by visiting:\s*(\S+)/.exec(err);
      if (m && !summary.steps.includes('mcp-remote printed the URL')) {
        summary.steps.push('mcp-remote printed the URL');
        browse(m[1], plan.user, callback)
          .then((back) => fetch(back.href))
          .then((res) => { summary.steps.push(`opened mcp-remote's callback: ${res.status}`); resolve(); })
          .catch(reject);
      }
    });
  });
  const client = new Client({ name: 'login-test-host-remote', version: '1.0.0' }, { capabilities: {} });
  const connected = client.connect(transport);
  await Promise.race([signedIn, connected]);
  await connected;
  summary.steps.push('connected');
  summary.tools = (await client.listTools()).tools.map((t) => t.name);
  const r = await client.callTool({ name: plan.tool, arguments: plan.arguments || {} });
  summary.text = (r.content || []).map((c) => c.text || '').join('');
  if (r.isError) summary.failures.push(`the call failed: ${summary.text}`);
  await client.close();
  if (!summary.steps.includes('mcp-remote printed the URL')) summary.failures.push(`no sign-in: ${err.slice(-2000)}`);
}

async function main() {
  if (plan.remote) {
    await remote();
    return;
  }
  if (plan.browse) {
    const back = await browse(plan.browse, plan.user, plan.until);
    const res = await fetch(back.href);
    summary.steps.push(`opened the callback: ${res.status}`);
    return;
  }
  const provider = new Provider();
  try {
    await connect(provider);
    summary.failures.push('connected without signing in');
    return;
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    summary.steps.push('unauthorized');
  }
  const back = await browse(provider.sentTo.href, plan.user);
  if (back.searchParams.get('state') !== 'state-from-the-host') summary.failures.push('the state did not come back');
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code came back: ${back.searchParams.get('error')} ${back.searchParams.get('error_description')}`);
  summary.steps.push(`back with a code, iss ${back.searchParams.get('iss')}`);
  const first = new StreamableHTTPClientTransport(new URL(plan.url), { authProvider: provider });
  await first.finishAuth(code);
  for (const j of jars.values()) for (const [k, v] of j) if (k.startsWith('sluice_login')) summary.canaries.push(v);
  summary.canaries.push(provider.verifier, provider.saved.access_token, provider.saved.refresh_token);
  const { client } = await connect(provider);
  summary.steps.push('connected');
  // What Sluice's access token says (its payload only; the token itself is not printed).
  const payload = JSON.parse(Buffer.from(provider.saved.access_token.split('.')[1], 'base64url').toString());
  summary.token = { iss: payload.iss, aud: payload.aud, sub: payload.sub, groups: payload.groups };
  if (plan.reveal) summary.tokens = { access: provider.saved.access_token, refresh: provider.saved.refresh_token, client_id: provider.info.client_id };
  summary.tools = (await client.listTools()).tools.map((t) => t.name);
  const r = await client.callTool({ name: plan.tool, arguments: plan.arguments || {} });
  summary.text = (r.content || []).map((c) => c.text || '').join('');
  if (r.isError) summary.failures.push(`the call failed: ${summary.text}`);
  await client.close();
  if (plan.replay) {
    const first = provider.saved.refresh_token;
    const second = await refresh(provider, first);
    await refresh(provider, first);
    await refresh(provider, second);
  }
}

main()
  .catch((e) => summary.failures.push(String(e && e.stack || e)))
  .finally(() => {
    process.stdout.write(`SUMMARY ${JSON.stringify(summary)}\n`);
    process.exit(summary.failures.length ? 1 : 0);
  });
