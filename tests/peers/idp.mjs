// A company identity provider for `cargo test --test peers`: npm `oidc-provider@9.13.3` (a
// certified OpenID provider) on 127.0.0.1, configured as a company would for its internal MCP
// servers and for Sluice (issue 31).
//
// Takes flags (all optional):
//   --port N                  listen port (default 0: a free one)
//   --access-ttl S            access token lifetime in seconds (default 300)
//   --sluice-audience URL     Sluice's resource: the audience of principals' JWTs, and the only
//                             audience a subject token may have in a token exchange
//   --client-secret S         the secret of the client `sluice` (default `sluice-secret`)
//   --sluice-auth M           its token_endpoint_auth_method (default client_secret_basic)
//   --redirect-uri URL        a redirect URI of `sluice` (repeatable; its `oauth` mode callback)
//   --scopes "a b"            the scopes every resource server offers (default `mcp:tools`)
//   --jwks-out FILE           writes the public JWKS there (for Sluice's `[auth.jwt] jwks_file`)
//   --groups USER=G1,G2       USER's groups (repeatable): the `groups` claim of their ID token
//                             when the `groups` scope is asked (Sluice's `[auth.login]`)
// Resource servers (RFC 8707 resource indicators): any http://127.0.0.1 or http://localhost URL,
// and --sluice-audience; every access token for one is a JWT (RS256, `typ: at+jwt`).
//
// Gives, on stdout: one line `IDP {"issuer":…,"port":…,"jwks":…}` once it accepts requests, then
// one line `GRANT <grant_type> <client_id>` per token it issues (and GET /test/counts answers
// `{"<grant_type>": n, …}`). Clients: `sluice` (confidential: authorization_code,
// refresh_token, client_credentials, token exchange), `tester` (public, PKCE, redirect URI
// http://127.0.0.1/tester-callback: how tests log users in, see idp_user.mjs), and any client
// registered through Dynamic Client Registration (/reg). Users: any login name at the
// development sign-in form is a user, `sub` = that name. A refresh token comes with every code
// grant of a client allowed refresh_token (not only with `offline_access`).
//
// Token exchange (RFC 8693, grant `urn:ietf:params:oauth:grant-type:token-exchange`): refuses a
// client without that grant (`unauthorized_client`), a subject token that is not an access
// token this IdP signed for --sluice-audience, unexpired (`invalid_grant`), a target (`resource`
// or `audience`) that is not a resource server (`invalid_target`), scopes beyond the offered
// ones (`invalid_scope`); gives a JWT access token for the target with the subject's `sub`.
//
// Ends when its stdin reaches end-of-file (a test binary holds the pipe).
// Run by hand:  SLUICE_OIDC_PROVIDER=… $SLUICE_NODE22 tests/peers/idp.mjs --sluice-audience http://127.0.0.1:1/mcp

import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.SLUICE_OIDC_PROVIDER;
if (!modules) {
  console.error('SLUICE_OIDC_PROVIDER is not set: run `eval "$(bash scripts/peers.sh)"`');
  process.exit(2);
}
const load = (rel) => import(pathToFileURL(join(modules, rel)).href);
const { default: Provider, errors } = await load('oidc-provider/lib/index.js');
const jose = await load('jose/dist/webapi/index.js');

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

function flags(argv) {
  const out = { port: 0, accessTtl: 300, clientSecret: 'sluice-secret', sluiceAuth: 'client_secret_basic', redirectUris: [], scopes: 'mcp:tools', groups: {} };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (v === undefined) throw new Error(`flag ${k} needs a value`);
    switch (k) {
      case '--port': out.port = Number(v); break;
      case '--access-ttl': out.accessTtl = Number(v); break;
      case '--sluice-audience': out.sluiceAudience = v; break;
      case '--client-secret': out.clientSecret = v; break;
      case '--sluice-auth': out.sluiceAuth = v; break;
      case '--redirect-uri': out.redirectUris.push(v); break;
      case '--scopes': out.scopes = v; break;
      case '--jwks-out': out.jwksOut = v; break;
      case '--groups': { const [user, list] = v.split('='); out.groups[user] = list.split(','); break; }
      default: throw new Error(`unknown flag ${k}`);
    }
  }
  return out;
}

const opts = flags(process.argv.slice(2));
const loopback = /^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?\//;
const isResource = (url) => typeof url === 'string' && (url === opts.sluiceAudience || loopback.test(url));

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const signing = { ...(await jose.exportJWK(privateKey)), kid: 'idp-rs256', alg: 'RS256', use: 'sig' };
const publicJwk = (({ kty, n, e, kid, alg, use }) => ({ kty, n, e, kid, alg, use }))(signing);
const ownKeys = jose.createLocalJWKSet({ keys: [publicJwk] });

const counts = {};
function resourceServer(indicator) {
  if (!isResource(indicator)) throw new errors.InvalidTarget('not a resource server of this IdP');
  return {
    scope: opts.scopes,
    audience: indicator,
    accessTokenTTL: opts.accessTtl,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };
}

// The issuer names the port, known once listening.
const server = createServer();
server.listen(opts.port, '127.0.0.1');
await once(server, 'listening');
const port = server.address().port;
const issuer = `http://127.0.0.1:${port}`;

const grantTypes = ['authorization_code', 'refresh_token', 'client_credentials', TOKEN_EXCHANGE];
const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'sluice',
      client_secret: opts.clientSecret,
      token_endpoint_auth_method: opts.sluiceAuth,
      grant_types: grantTypes,
      response_types: ['code'],
      redirect_uris: opts.redirectUris.length ? opts.redirectUris : ['http://127.0.0.1/sluice-callback'],
    },
    {
      client_id: 'tester',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/tester-callback'],
    },
  ],
  jwks: { keys: [signing] },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub, groups: opts.groups[sub] || [] }) }),
  claims: { openid: ['sub'], groups: ['groups'] },
  // The claims of the scopes asked go into the ID token (an RP reads them there, as Sluice does).
  conformIdTokenClaims: false,
  scopes: ['openid', 'offline_access', 'groups', ...opts.scopes.split(' ')],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      getResourceServerInfo: async (_ctx, indicator) => resourceServer(indicator),
      useGrantedResource: async () => true,
    },
  },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: async () => false,
  ttl: {
    AccessToken: () => opts.accessTtl,
    ClientCredentials: () => opts.accessTtl,
    RefreshToken: () => 24 * 3600,
    Grant: () => 24 * 3600,
    Session: () => 24 * 3600,
    Interaction: () => 600,
    IdToken: () => 600,
  },
  pkce: { required: (_ctx, client) => client.clientAuthMethod === 'none' },
  cookies: { keys: ['idp-test-cookie-key'] },
});
provider.on('grant.success', (ctx) => {
  const type = ctx.oidc.params.grant_type;
  counts[type] = (counts[type] || 0) + 1;
  process.stdout.write(`GRANT ${type} ${ctx.oidc.client?.clientId}\n`);
});

provider.registerGrantType(
  TOKEN_EXCHANGE,
  async (ctx) => exchange(ctx),
  ['subject_token', 'subject_token_type', 'audience', 'resource', 'scope', 'requested_token_type', 'actor_token', 'actor_token_type'],
  ['audience', 'resource'],
);

// RFC 8693 §2.1-2.2: the subject token must be an access token this IdP issued for Sluice.
async function exchange(ctx) {
  const p = ctx.oidc.params;
  const { client } = ctx.oidc;
  if (!p.subject_token) throw new errors.InvalidRequest('missing subject_token');
  if (p.subject_token_type !== ACCESS_TOKEN_TYPE && p.subject_token_type !== JWT_TYPE) {
    throw new errors.InvalidRequest('subject_token_type must be access_token or jwt');
  }
  if (p.requested_token_type && p.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('only access tokens are issued');
  }
  if (p.actor_token) throw new errors.InvalidRequest('actor tokens are not accepted');
  if (!opts.sluiceAudience) throw new errors.InvalidGrant('no audience is configured for subject tokens');
  let subject;
  try {
    ({ payload: subject } = await jose.jwtVerify(p.subject_token, ownKeys, {
      issuer: provider.issuer,
      audience: opts.sluiceAudience,
      typ: 'at+jwt',
      algorithms: ['RS256'],
    }));
  } catch {
    throw new errors.InvalidGrant('subject_token is not a valid access token for the audience allowed');
  }
  const targets = [p.resource, p.audience].flat().filter(Boolean);
  if (targets.length !== 1) throw new errors.InvalidTarget('name one resource or audience');
  const server = resourceServer(targets[0]);
  const offered = new Set(server.scope.split(' '));
  const scopes = (p.scope || '').split(' ').filter(Boolean);
  if (scopes.some((s) => !offered.has(s))) throw new errors.InvalidScope('a requested scope is not offered', p.scope);
  const token = new provider.AccessToken({
    accountId: subject.sub,
    client,
    scope: scopes.join(' ') || undefined,
    gty: 'token_exchange',
  });
  token.resourceServer = server;
  ctx.oidc.entity('AccessToken', token);
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/test/counts') {
    // The test-only counter of grants by type.
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(counts));
    return;
  }
  callback(req, res);
});
const jwks = { keys: [publicJwk] };
if (opts.jwksOut) writeFileSync(opts.jwksOut, JSON.stringify(jwks));
process.stdout.write(`IDP ${JSON.stringify({ issuer, port, jwks: `${issuer}/jwks` })}\n`);

process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
