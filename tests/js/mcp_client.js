// Runs MCP operations with the official MCP TypeScript SDK (@modelcontextprotocol/sdk's Client
// over its StreamableHTTPClientTransport), for the relay's MCP interop tests.
//
//   echo '{"url": ".../mcp", "ops": [{"op": "list"}]}' | node mcp_client.js
//
// Reads one JSON object on stdin:
//   url       the MCP endpoint,
//   headers   optional HTTP headers (the relay's Authorization),
//   ops       operations, in order: {"op": "list"} or {"op": "call", "name", "arguments"}; a
//             call may ask for progress ("progress": true: each notification is kept, and
//             each resets the request's timeout) and be cancelled after that many of them
//             ("cancelAfterProgress": n, with an AbortSignal: the SDK sends
//             notifications/cancelled); or {"op": "task", "name", "arguments"}: the call as a
//             2025-11-25 task (client.experimental.tasks.callToolStream), cancelled
//             (tasks/cancel) after that many status polls ("cancelAfterStatus": n), and a
//             question answered ("answer": text) by calling the tool again with its taskId.
//
// Prints one JSON object: {"kind": "done", "protocolVersion": <negotiated>, "server": {...},
// "ops": [{"result": ...} or {"error": {"code", "message"}}, ...]} (a call that asked for
// progress also has "progress": [{"progress", "total", "message", "atMs"}, ...]; a task has
// "rounds": [{"taskId", "messages": [the stream's messages]}, ...]) or, when the client could
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

async function callWithProgress(op) {
  const progress = [];
  const started = Date.now();
  const aborting = new AbortController();
  const options = {
    signal: aborting.signal,
    resetTimeoutOnProgress: true,
    onprogress: (notification) => {
      progress.push({ ...notification, atMs: Date.now() - started });
      if (op.cancelAfterProgress && progress.length >= op.cancelAfterProgress) {
        aborting.abort('the test cancels the call');
      }
    },
  };
  try {
    const params = { name: op.name, arguments: op.arguments ?? {} };
    return { result: await client.callTool(params, undefined, options), progress };
  } catch (error) {
    return { error: failure(error), progress };
  }
}

async function taskRound(op, args) {
  const messages = [];
  let taskId = null;
  let statuses = 0;
  const stream = client.experimental.tasks.callToolStream(
    { name: op.name, arguments: args },
    undefined,
    { task: {} },
  );
  for await (const message of stream) {
    messages.push(message.type === 'error' ? { type: 'error', error: failure(message.error) } : message);
    if (message.type === 'taskCreated') taskId = message.task.taskId;
    if (message.type === 'taskStatus' && ++statuses === op.cancelAfterStatus) {
      messages.push({ type: 'canceled', task: await client.experimental.tasks.cancelTask(taskId) });
    }
  }
  return { taskId, messages };
}

async function callAsTask(op) {
  const rounds = [await taskRound(op, op.arguments ?? {})];
  const last = rounds[0].messages.at(-1);
  if (op.answer !== undefined && last?.result?.structuredContent?.state === 'input-required') {
    rounds.push(await taskRound(op, { text: op.answer, taskId: rounds[0].taskId }));
  }
  return { rounds };
}

const outcomes = [];
for (const op of spec.ops ?? []) {
  try {
    if (op.op === 'list') {
      outcomes.push({ result: await client.listTools() });
    } else if (op.op === 'call' && (op.progress || op.cancelAfterProgress)) {
      outcomes.push(await callWithProgress(op));
    } else if (op.op === 'task') {
      outcomes.push(await callAsTask(op));
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
