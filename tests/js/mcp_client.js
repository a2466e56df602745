// Runs MCP operations with the official MCP TypeScript SDK (@modelcontextprotocol/sdk's Client
// over its StreamableHTTPClientTransport), for the relay's MCP interop tests.
//
//   echo '{"url": ".../mcp", "ops": [{"op": "list"}]}' | node mcp_client.js
//
// Reads one JSON object on stdin:
//   url       the MCP endpoint,
//   headers   optional HTTP headers (the relay's Authorization),
//   ops       operations, in order: {"op": "list"} or {"op": "call", "name", "arguments"}.
//
// Prints one JSON object: {"kind": "done", "protocolVersion": <negotiated>, "server": {...},
// "ops": [{"result": ...} or {"error": {"code", "message"}}, ...]} or, when the client could
// not connect, {"kind": "error", "code": <HTTP status or JSON-RPC code>, "message": "..."}. Exits 0 either way, 2 when stdin is not a
// spec.

import process from 'node:process';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function failure(error) {
  return { code: error?.code ?? null, message: String(error?.message ?? error) };
}

let spec;
try {
  spec = await readStdin();
} catch (error) {
  print({ kind: 'error', message: `no spec on stdin: ${error}` });
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(spec.url), {
  requestInit: { headers: spec.headers ?? {} },
});
const client = new Client({ name: 'brass-relay-interop', version: '1.0.0' });
try {
  await client.connect(transport);
} catch (error) {
  print({ kind: 'error', ...failure(error) });
  process.exit(0);
}

const outcomes = [];
for (const op of spec.ops ?? []) {
  try {
    if (op.op === 'list') {
      outcomes.push({ result: await client.listTools() });
    } else if (op.op === 'call') {
      outcomes.push({
        result: await client.callTool({ name: op.name, arguments: op.arguments ?? {} }),
      });
    } else {
      outcomes.push({ error: { code: null, message: `unknown op ${op.op}` } });
    }
  } catch (error) {
    outcomes.push({ error: failure(error) });
  }
}
print({
  kind: 'done',
  protocolVersion: transport.protocolVersion ?? null,
  server: client.getServerVersion() ?? null,
  ops: outcomes,
});
await client.close();
