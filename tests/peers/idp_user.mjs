// A user at the company IdP of tests/peers/idp.mjs, driven over HTTP as a browser would: its
// development sign-in form (any login name is a user) and its consent form (issue 31).
//
// Takes a command:
//   login  ISSUER USER RESOURCE [SCOPE]  signs USER in through the public client `tester`
//          (authorization code with PKCE S256, `resource` = RESOURCE, scope default
//          `openid offline_access`); prints one line `TOKENS {"access_token","refresh_token",
//          "expires_in","scope"}`: the access token is a JWT for RESOURCE with `sub` = USER.
//   browse URL USER                    opens an authorization URL (Sluice's `oauth` sign-in),
//          signs USER in, consents, follows the redirect back to the client's redirect URI
//          (e.g. Sluice's /oauth/callback) and prints `BROWSED {"status","location","body"}`.
// Refuses (exit 1, the reason on stderr): an IdP answer that is neither a form nor a redirect.

import { createHash, randomBytes } from 'node:crypto';

const jar = new Map();
const b64url = (buf) => buf.toString('base64url');

function keep(res) {
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const at = pair.indexOf('=');
    jar.set(pair.slice(0, at).trim(), pair.slice(at + 1));
  }
}

async function get(url, init = {}) {
  const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const res = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers || {}), cookie } });
  keep(res);
  return res;
}

// Follows redirects and answers the sign-in and consent forms until the IdP redirects to a URL
// not its own (the client's redirect URI); gives that URL.
async function authorize(url, user) {
  const idp = new URL(url).origin;
  let res = await get(url);
  for (let step = 0; step < 12; step += 1) {
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location'), res.url || url).href;
      if (new URL(next).origin !== idp) return next;
      res = await get(next);
      continue;
    }
    const html = await res.text();
    if (res.status !== 200) throw new Error(`the IdP answered ${res.status}: ${html.slice(0, 300)}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(html);
    if (!action) throw new Error(`no form in the IdP's page: ${html.slice(0, 300)}`);
    const form = new URLSearchParams();
    for (const m of html.matchAll(/<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) form.set(m[1], m[2]);
    if (/name="login"/.test(html)) {
      form.set('login', user);
      form.set('password', 'any');
    }
    res = await get(new URL(action[1], idp).href, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
  }
  throw new Error('the IdP did not redirect back within 12 steps');
}

async function login(issuer, user, resource, scope = 'openid offline_access') {
  const verifier = b64url(randomBytes(32));
  const challenge = b64url(createHash('sha256').update(verifier).digest());
  const redirect = 'http://127.0.0.1/tester-callback';
  const q = new URLSearchParams({
    client_id: 'tester', response_type: 'code', redirect_uri: redirect, scope, resource,
    code_challenge: challenge, code_challenge_method: 'S256', state: b64url(randomBytes(16)), prompt: 'consent',
  });
  const back = new URL(await authorize(`${issuer}/auth?${q}`, user));
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code came back: ${back.searchParams.get('error')}`);
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirect, code_verifier: verifier, client_id: 'tester', resource }),
  });
  const t = await res.json();
  if (!res.ok) throw new Error(`the token endpoint refused the code: ${t.error}`);
  const { access_token, refresh_token, expires_in } = t;
  process.stdout.write(`TOKENS ${JSON.stringify({ access_token, refresh_token, expires_in, scope: t.scope })}\n`);
}

async function browse(url, user) {
  const back = await authorize(url, user);
  let status = 0;
  let body = '';
  try {
    const res = await fetch(back, { redirect: 'manual' });
    status = res.status;
    body = (await res.text()).slice(0, 2000);
  } catch (e) {
    body = `the redirect URI could not be reached: ${e.cause?.code || e.message}`;
  }
  process.stdout.write(`BROWSED ${JSON.stringify({ status, location: back, body })}\n`);
}

const [cmd, ...args] = process.argv.slice(2);
try {
  if (cmd === 'login') await login(...args);
  else if (cmd === 'browse') await browse(...args);
  else throw new Error('usage: idp_user.mjs login ISSUER USER RESOURCE [SCOPE] | browse URL USER');
} catch (e) {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
}
