// Preload that ends a Node process when its stdin reaches end-of-file. A test binary holds the
// write end of the pipe and never writes to it, so the server goes when the test binary goes,
// however it ends. Usage: node --require tests/peers/stdin_lifeline.cjs <server.js> [args]
'use strict';
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
