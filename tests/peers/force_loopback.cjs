// Preload for Node servers that listen on all interfaces (npm @modelcontextprotocol/server-everything
// calls app.listen(PORT) with no host). Every TCP listen() of the process is bound to 127.0.0.1
// instead, and once a server is listening its real port is announced on stdout as
// `LISTENING <port>`, so a test can start it with PORT=0 and learn which port it got.
// Usage: PORT=0 node --require tests/peers/force_loopback.cjs <server.js> [args]
'use strict';
const net = require('node:net');

const original = net.Server.prototype.listen;

function announce(server) {
  server.once('listening', () => {
    const addr = server.address();
    if (addr && typeof addr === 'object') process.stdout.write(`LISTENING ${addr.port}\n`);
  });
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, callback]): keep only the port and the callback.
    const callback = args.find((a) => typeof a === 'function');
    announce(this);
    return original.call(this, { port: Number(first), host: '127.0.0.1' }, callback);
  }
  if (first && typeof first === 'object' && 'port' in first && first.path === undefined) {
    announce(this);
    args[0] = { ...first, host: '127.0.0.1' };
  }
  return original.apply(this, args);
};
