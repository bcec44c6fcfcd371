// A dual-era MCP upstream on the TypeScript SDK 2.x (npm `@modelcontextprotocol/server@2.4.0`),
// for `cargo test --test peers` (bridge_b::stateless_dual_era).
//
// Serves `createMcpHandler(factory)` with its defaults on 127.0.0.1 (a free port; `LISTENING
// <port>` on stdout once it accepts requests) at `/mcp`: 2026-07-28 requests on the modern path,
// and 2025-era requests through the SDK's stateless legacy fallback (each request a fresh server
// instance, no `Mcp-Session-Id`, GET and DELETE answered 405). Node's own `http` server carries
// it; the request and response are turned into web-standard ones here (no adapter package).
//
// Tools:
//   echo(text)       -> text
//   ask_model(prompt) -> written once for both eras with the 2026-07-28 API: it returns
//                        `inputRequired({inputRequests: {llm: createMessage(...)}})` until the
//                        retry carries the sampling answer, then "model said: <text>". On the
//                        2025 wire the SDK's legacy shim would send a real sampling request, but
//                        only on an instance that saw `initialize`: stateless, it cannot.
//
// The process ends when its stdin reaches end-of-file (a test binary holds the pipe).
// Run by hand:  NODE_PATH=$SLUICE_TS_SERVER2 $SLUICE_NODE22 tests/peers/ts2_upstream.cjs
'use strict';

const http = require('node:http');
const { createMcpHandler, McpServer, inputRequired, inputResponse } = require('@modelcontextprotocol/server');
const { z } = require('zod');

function factory() {
  // logging: the 2025 clients the tests run set a level after initialize.
  const server = new McpServer({ name: 'ts2-dual-era-upstream', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('echo', { description: 'Return the text unchanged.', inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool(
    'ask_model',
    { description: "Ask the client's model once (input_required).", inputSchema: z.object({ prompt: z.string() }) },
    async ({ prompt }, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'llm');
      if (answer.kind === 'sampling') {
        const content = answer.result.content;
        const text = content && content.type === 'text' ? content.text : '?';
        return { content: [{ type: 'text', text: `model said: ${text} (model=${answer.result.model})` }] };
      }
      return inputRequired({
        inputRequests: {
          llm: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 64 }),
        },
      });
    },
  );
  return server;
}

const handler = createMcpHandler(factory, { onerror: () => {} });

async function serve(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = chunks.length ? Buffer.concat(chunks) : undefined;
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
    else if (v !== undefined) headers.set(k, v);
  }
  const abort = new AbortController();
  res.on('close', () => abort.abort());
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers,
    body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
    signal: abort.signal,
  });
  const response = await handler.fetch(request);
  res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
  if (!response.body) return res.end();
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    res.write(value);
  }
  res.end();
}

const server = http.createServer((req, res) => {
  serve(req, res).catch(() => {
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
server.listen({ port: 0, host: '127.0.0.1' }, () => process.stdout.write(`LISTENING ${server.address().port}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
