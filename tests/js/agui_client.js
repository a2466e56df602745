// Runs one AG-UI run with the official @ag-ui/client HttpAgent, for the relay's AG-UI tests.
//
//   echo '{"url": ".../agui/teams/crew", "text": "hello"}' | node agui_client.js
//
// Reads one JSON object on stdin:
//   url        the AG-UI endpoint,
//   headers    optional HTTP headers (the relay's Authorization),
//   text       the user message of the run,
//   threadId   optional thread id (the A2A context),
//   resume     optional resume entries answering the previous run's interrupts,
//   state      optional state the run starts from.
//
// Prints JSON lines: {"kind": "event", "at": <ms since the epoch>, "event": <AG-UI event>} for
// each event the agent applied (HttpAgent verifies their order: a violation is an error), then
// {"kind": "done", "newMessages": [...], "state": {...}, "interrupts": [...]} or
// {"kind": "error", "message": "..."}. Exits 0 either way, 2 when stdin is not a spec.

import process from 'node:process';

import { HttpAgent } from '@ag-ui/client';

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

let spec;
try {
  spec = await readStdin();
} catch (error) {
  print({ kind: 'error', message: `no spec on stdin: ${error}` });
  process.exit(2);
}

const agent = new HttpAgent({
  url: spec.url,
  headers: spec.headers ?? {},
  threadId: spec.threadId,
  initialState: spec.state,
});
agent.addMessage({ id: `user-${Date.now()}`, role: 'user', content: spec.text });

try {
  await agent.runAgent(spec.resume ? { resume: spec.resume } : {}, {
    onEvent({ event }) {
      print({ kind: 'event', at: Date.now(), event });
    },
  });
  print({
    kind: 'done',
    messages: agent.messages,
    state: agent.state,
    interrupts: agent.pendingInterrupts,
  });
} catch (error) {
  print({ kind: 'error', message: String(error?.message ?? error) });
}
