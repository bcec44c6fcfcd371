// An internal MCP server behind the company IdP (tests/peers/idp.mjs), on the TypeScript SDK
// 1.x (npm `@modelcontextprotocol/sdk@1.32.2`, its server auth helpers), for
// `cargo test --test peers` (issue 31).
//
// Takes the IdP's issuer as its one argument (`--scope S` after it: a scope every call needs,
// default none). Listens on 127.0.0.1 (a free port; `LISTENING <port>` on stdout once it accepts
// requests); its MCP endpoint and resource is http://127.0.0.1:<port>/mcp (2025-11-25 Streamable
// HTTP, stateless, JSON answers). Serves RFC 9728 protected resource metadata at
// /.well-known/oauth-protected-resource/mcp naming the IdP (and the IdP's metadata at
// /.well-known/oauth-authorization-server), and answers a request without a valid token 401 with
// a Bearer challenge pointing at it.
//
// Gives: the tool `whoami`, whose text is the JSON {"sub","aud","scope","client_id"} of the token
// the request carried. Prints `SAW <sub> <client_id>` for each request it let in and
// `REFUSED <reason>` for each it refused (nothing of a token itself).
// Refuses: a token not signed by the IdP's keys (its JWKS), of another issuer, for another
// audience than its own resource URL (so a token meant for Sluice is refused), expired, or not
// an access token (`typ` at+jwt).
//
// The process ends when its stdin reaches end-of-file (a test binary holds the pipe).
// Run by hand:  NODE_PATH=$SLUICE_TS_SDK1 $SLUICE_NODE22 tests/peers/protected_server.cjs http://127.0.0.1:PORT
'use strict';

const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { createMcpExpressApp } = require('@modelcontextprotocol/sdk/server/express.js');
const { requireBearerAuth } = require('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
const { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } = require('@modelcontextprotocol/sdk/server/auth/router.js');
const { InvalidTokenError } = require('@modelcontextprotocol/sdk/server/auth/errors.js');
const jose = require('jose');

const [issuer, scopeFlag, requiredScope] = process.argv.slice(2);
if (!issuer) {
  console.error('usage: protected_server.cjs ISSUER [--scope SCOPE]');
  process.exit(2);
}
const required = scopeFlag === '--scope' && requiredScope ? [requiredScope] : [];

function tools(server, auth) {
  server.registerTool('whoami', { description: 'Who the access token says the caller is.' }, async () => {
    const { sub, aud, scope, client_id } = auth.extra;
    return { content: [{ type: 'text', text: JSON.stringify({ sub, aud, scope, client_id }) }] };
  });
}

async function main() {
  const metadata = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
  const jwks = jose.createRemoteJWKSet(new URL(metadata.jwks_uri));
  const app = createMcpExpressApp();
  const listener = app.listen(0, '127.0.0.1');
  await new Promise((ok) => listener.once('listening', ok));
  const port = listener.address().port;
  const resource = new URL(`http://127.0.0.1:${port}/mcp`);

  const verifier = {
    async verifyAccessToken(token) {
      try {
        const { payload } = await jose.jwtVerify(token, jwks, { issuer: metadata.issuer, audience: resource.href, typ: 'at+jwt' });
        process.stdout.write(`SAW ${payload.sub} ${payload.client_id}\n`);
        return {
          token,
          clientId: payload.client_id,
          scopes: (payload.scope || '').split(' ').filter(Boolean),
          expiresAt: payload.exp,
          resource,
          extra: payload,
        };
      } catch (e) {
        process.stdout.write(`REFUSED ${e.code || 'invalid'}\n`);
        throw new InvalidTokenError('the token is not valid for this server');
      }
    },
  };
  app.use(mcpAuthMetadataRouter({ oauthMetadata: metadata, resourceServerUrl: resource, scopesSupported: ['mcp:tools'] }));
  const bearer = requireBearerAuth({
    verifier,
    requiredScopes: required,
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(resource),
    expectedResource: resource,
  });
  app.post('/mcp', bearer, async (req, res) => {
    const server = new McpServer({ name: 'protected-internal', version: '1.0.0' });
    tools(server, req.auth);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  const notAllowed = (_req, res) => res.status(405).set('Allow', 'POST').end();
  app.get('/mcp', bearer, notAllowed);
  app.delete('/mcp', bearer, notAllowed);
  process.stdout.write(`LISTENING ${port}\n`);
}

process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
