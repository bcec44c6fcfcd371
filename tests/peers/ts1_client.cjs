// A 2025-11-25 MCP client on the official TypeScript SDK (npm @modelcontextprotocol/sdk@1.32.2),
// for `cargo test --test peers` (bridge_b). It knows only the handshake-era wire (initialize,
// Mcp-Session-Id, the GET stream, server->client requests mid-call); its sampling handler is a
// deterministic fake LLM answering `ECHO-TS[<prompt>]` from model `fake-llm-ts1`.
//
// Takes one argument, a JSON plan:
//   {"url": "http://127.0.0.1:PORT/mcp", "token": "api key" | null,
//    "calls": [{"name": "py__ask_llm", "arguments": {...}, "expect": ["substring", ...]}, ...]}
// Does initialize (declaring sampling), ping, tools/list, each call, then DELETEs its session
// (terminateSession). Every HTTP exchange goes through a recording fetch.
//
// Prints one JSON summary line on stdout (`SUMMARY {...}`): the negotiated version, the server's
// name, the session id's shape, the tool names, per call its text, what the sampling handler was
// asked (with the server's request id), and the HTTP answers seen (verb, method, status, content
// type). Exits 0 only when every call completed without isError and held every `expect`.
//
// Run by hand:  NODE_PATH=$SLUICE_TS_SDK1 $SLUICE_NODE22 tests/peers/ts1_client.cjs '{"url": "...", "calls": []}'
'use strict';
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { CreateMessageRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

const plan = JSON.parse(process.argv[2]);
const summary = { failures: [], calls: [], asked: [], http: [] };

async function recordingFetch(url, init) {
  const verb = (init && init.method) || 'GET';
  let method = null;
  if (verb === 'POST' && typeof init.body === 'string') {
    try {
      method = JSON.parse(init.body).method || null;
    } catch {
      method = '?';
    }
  }
  const response = await fetch(url, init);
  summary.http.push({ verb, method, status: response.status, content_type: response.headers.get('content-type') || '' });
  return response;
}

async function run() {
  const client = new Client({ name: 'bridge-b-ts1-client', version: '1.32.2' }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req, extra) => {
    const first = req.params.messages[0].content;
    const prompt = first && first.type === 'text' ? first.text : '?';
    summary.asked.push({ prompt, request_id: extra.requestId, max_tokens: req.params.maxTokens });
    return { role: 'assistant', model: 'fake-llm-ts1', content: { type: 'text', text: `ECHO-TS[${prompt}]` }, stopReason: 'endTurn' };
  });
  const requestInit = plan.token ? { headers: { Authorization: `Bearer ${plan.token}` } } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(plan.url), { requestInit, fetch: recordingFetch });
  await client.connect(transport);
  summary.protocol_version = transport.protocolVersion;
  summary.server_name = (client.getServerVersion() || {}).name;
  summary.session_id_visible_ascii = /^[\x21-\x7e]+$/.test(transport.sessionId || '');
  summary.ping = await client.ping();
  summary.tools = (await client.listTools()).tools.map((t) => t.name);
  for (const call of plan.calls) {
    const entry = { name: call.name };
    summary.calls.push(entry);
    try {
      const r = await client.callTool({ name: call.name, arguments: call.arguments || {} });
      entry.text = r.content.filter((c) => c.type === 'text').map((c) => c.text).join(' | ');
      entry.is_error = !!r.isError;
      entry.result_type = r.resultType === undefined ? null : r.resultType;
      if (r.isError) summary.failures.push(`call ${call.name} answered isError: ${entry.text}`);
      for (const want of call.expect || []) {
        if (!entry.text.includes(want)) summary.failures.push(`call ${call.name} answered ${JSON.stringify(entry.text)}, expected ${JSON.stringify(want)} in it`);
      }
    } catch (e) {
      entry.exception = String((e && e.message) || e);
      summary.failures.push(`call ${call.name} raised ${entry.exception}`);
    }
  }
  await transport.terminateSession();
  await client.close();
}

run()
  .catch((e) => {
    summary.failures.push(`client raised ${(e && e.stack) || e}`);
  })
  .finally(() => {
    console.log('SUMMARY ' + JSON.stringify(summary));
    process.exit(summary.failures.length ? 1 : 0);
  });
