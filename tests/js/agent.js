// An A2A agent built with the official @a2a-js/sdk, for the relay's interop tests.
//
//   node agent.js [--port N] [--versions 1.0,0.3]     (or JS_AGENT_PORT, JS_AGENT_VERSIONS)
//
// Listens on 127.0.0.1 (port 0 picks a free one) and prints one JSON line when it is ready:
//   {"ready": true, "url": "http://127.0.0.1:PORT", "card": ".../.well-known/agent-card.json"}
// It serves its agent card, JSON-RPC at /a2a/jsonrpc and HTTP+JSON under /a2a/rest, for A2A 1.0
// and (unless --versions says otherwise) 0.3 through the SDK's compatibility layer. Push
// notification configs and an extended card are on. GET /_test/requests answers every A2A
// request received so far (method, path, headers, body), for tests of what reached the agent.
//
// What it does is chosen by the first word of the incoming message text:
//   echo <text>    a task: submitted, working, artifact "echo" = <text>, completed
//   stream <text>  a task: working, artifact "story" in CHUNKS (append after the first,
//                  lastChunk on the last), completed
//   working [ms]   a task left working (the call answers at once); it completes later (after ms,
//                  default 1500) with artifact "result" = "done", unless cancelled before
//   ask            input-required ("What name should I greet?"); the next message on that task
//                  re-sends the still input-required task as the first event of its stream, as
//                  @a2a-js/sdk agents do, then completes with artifact "greeting" = "Hello, <name>!"
//   message <text> a plain Message answer (no task): "<text>"
//   never          a task that works until it is cancelled
// Any other text is answered like echo.

import http from 'node:http';
import process from 'node:process';

import express from 'express';
import {
  AGENT_CARD_PATH,
  A2A_PROTOCOL_VERSION,
  AgentCard,
  Message,
  Task,
  TaskArtifactUpdateEvent,
  TaskState,
  TaskStatusUpdateEvent,
} from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import {
  agentCardHandler,
  jsonRpcHandler,
  restHandler,
  UserBuilder,
} from '@a2a-js/sdk/server/express';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';
import { createLegacyAwarePushNotificationSender } from '@a2a-js/sdk/compat/v0_3/server';

export const CHUNKS = ['Once ', 'upon ', 'a ', 'time.'];
const CHUNK_DELAY_MS = 50;
const WORKING_DEFAULT_MS = 1500;
const KEPT_REQUESTS = 200;

function option(name, environment, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  if (index !== -1 && index + 1 < process.argv.length) return process.argv[index + 1];
  return process.env[environment] ?? fallback;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => new Date().toISOString();

function agentMessage(text, taskId, contextId) {
  return Message.fromJSON({
    messageId: crypto.randomUUID(),
    role: 'ROLE_AGENT',
    parts: [{ text }],
    ...(taskId ? { taskId } : {}),
    ...(contextId ? { contextId } : {}),
  });
}

function userText(message) {
  return (message?.parts ?? [])
    .filter((part) => part.content?.$case === 'text')
    .map((part) => part.content.value)
    .join(' ')
    .trim();
}

function status(taskId, contextId, state, text) {
  return AgentEvent.statusUpdate(
    TaskStatusUpdateEvent.fromJSON({
      taskId,
      contextId,
      status: {
        state,
        timestamp: now(),
        ...(text ? { message: Message.toJSON(agentMessage(text, taskId, contextId)) } : {}),
      },
    })
  );
}

function artifact(taskId, contextId, artifactId, text, { append = false, lastChunk = true } = {}) {
  return AgentEvent.artifactUpdate(
    TaskArtifactUpdateEvent.fromJSON({
      taskId,
      contextId,
      artifact: { artifactId, name: artifactId, parts: [{ text }] },
      append,
      lastChunk,
    })
  );
}

function newTask(context, state) {
  return Task.fromJSON({
    id: context.taskId,
    contextId: context.contextId,
    status: { state, timestamp: now() },
    history: [Message.toJSON(context.userMessage)],
  });
}

/** Chooses its behaviour from the first word of the message (see the top of this file). */
class InteropExecutor {
  constructor(taskStore) {
    this.taskStore = taskStore;
    this.cancelled = new Map(); // task id -> resolve of the wait of a "never" task
  }

  async execute(context, bus) {
    const { taskId, contextId } = context;
    const text = userText(context.userMessage);
    const [word, ...rest] = text.split(/\s+/);
    const argument = rest.join(' ');

    if (context.task) {
      // A follow-up turn of an input-required task: re-send the task as it still is (the
      // first event of every turn must be a task or a message), then finish it.
      bus.publish(AgentEvent.task(context.task));
      bus.publish(status(taskId, contextId, 'TASK_STATE_WORKING'));
      bus.publish(artifact(taskId, contextId, 'greeting', `Hello, ${text}!`));
      bus.publish(status(taskId, contextId, 'TASK_STATE_COMPLETED', `Hello, ${text}!`));
      bus.finished();
      return;
    }

    switch (word.toLowerCase()) {
      case 'message':
        bus.publish(AgentEvent.message(agentMessage(argument, undefined, contextId)));
        bus.finished();
        return;
      case 'ask':
        bus.publish(AgentEvent.task(newTask(context, TaskState.TASK_STATE_SUBMITTED)));
        bus.publish(
          status(taskId, contextId, 'TASK_STATE_INPUT_REQUIRED', 'What name should I greet?')
        );
        return;
      case 'stream':
        bus.publish(AgentEvent.task(newTask(context, TaskState.TASK_STATE_SUBMITTED)));
        bus.publish(status(taskId, contextId, 'TASK_STATE_WORKING'));
        for (const [index, chunk] of CHUNKS.entries()) {
          await sleep(CHUNK_DELAY_MS);
          bus.publish(
            artifact(taskId, contextId, 'story', chunk, {
              append: index > 0,
              lastChunk: index === CHUNKS.length - 1,
            })
          );
        }
        bus.publish(status(taskId, contextId, 'TASK_STATE_COMPLETED', 'Story streamed.'));
        bus.finished();
        return;
      case 'working': {
        bus.publish(AgentEvent.task(newTask(context, TaskState.TASK_STATE_WORKING)));
        const delay = Number.parseInt(argument, 10);
        this.completeLater(context, Number.isFinite(delay) ? delay : WORKING_DEFAULT_MS);
        return; // the bus settles with the task working: the call answers at once
      }
      case 'never': {
        bus.publish(AgentEvent.task(newTask(context, TaskState.TASK_STATE_SUBMITTED)));
        bus.publish(status(taskId, contextId, 'TASK_STATE_WORKING', 'Working, and never done.'));
        await new Promise((resolve) => this.cancelled.set(taskId, resolve));
        bus.publish(status(taskId, contextId, 'TASK_STATE_CANCELED', 'Cancelled.'));
        bus.finished();
        return;
      }
      default: {
        const echoed = word.toLowerCase() === 'echo' ? argument : text;
        bus.publish(AgentEvent.task(newTask(context, TaskState.TASK_STATE_SUBMITTED)));
        bus.publish(status(taskId, contextId, 'TASK_STATE_WORKING'));
        bus.publish(artifact(taskId, contextId, 'echo', echoed));
        bus.publish(status(taskId, contextId, 'TASK_STATE_COMPLETED'));
        bus.finished();
      }
    }
  }

  /** Completes a task left working, in the task store (its event bus is gone by then), unless
   * it was cancelled meanwhile. */
  completeLater(context, delay) {
    setTimeout(async () => {
      const task = await this.taskStore.load(context.taskId, context.context);
      if (!task || task.status?.state !== TaskState.TASK_STATE_WORKING) return;
      const done = Task.fromJSON({
        ...Task.toJSON(task),
        status: { state: 'TASK_STATE_COMPLETED', timestamp: now() },
        artifacts: [{ artifactId: 'result', name: 'result', parts: [{ text: 'done' }] }],
      });
      await this.taskStore.save(done, context.context);
    }, delay);
  }

  async cancelTask(taskId) {
    const release = this.cancelled.get(taskId);
    this.cancelled.delete(taskId);
    release?.();
  }
}

function buildCard(url, versions) {
  const interfaces = [
    { url: `${url}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION },
    { url: `${url}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: A2A_PROTOCOL_VERSION },
  ].map((entry) => ({ tenant: '', ...entry }));
  let supported = duplicateInterfacesForLegacy(interfaces, ['JSONRPC', 'HTTP+JSON']);
  supported = supported.filter((entry) =>
    versions.some((version) => entry.protocolVersion.startsWith(version))
  );
  return AgentCard.fromJSON({
    name: 'JS Interop Agent',
    description: 'An @a2a-js/sdk agent whose behaviour the first word of a message chooses.',
    version: '1.0.0',
    supportedInterfaces: supported,
    capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: true },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'interop',
        name: 'Interop',
        description: 'echo, stream, working, ask, message or never, then some text.',
        tags: ['test', 'interop'],
        examples: ['echo hello', 'stream', 'ask'],
      },
    ],
  });
}

function buildApp(url, versions) {
  const card = buildCard(url, versions);
  const extendedCard = AgentCard.fromJSON({
    ...AgentCard.toJSON(card),
    skills: [
      ...AgentCard.toJSON(card).skills,
      { id: 'extended', name: 'Extended', description: 'Only on the extended card.', tags: ['x'] },
    ],
  });
  const legacyCompat = { enabled: versions.includes('0.3') };
  const taskStore = new InMemoryTaskStore();
  const pushStore = new InMemoryPushNotificationStore();
  const handler = new DefaultRequestHandler(
    card,
    taskStore,
    new InteropExecutor(taskStore),
    undefined,
    pushStore,
    createLegacyAwarePushNotificationSender(pushStore, { timeout: 5000 }),
    // A provider function answers every caller; a plain card would go to authenticated ones only.
    async () => extendedCard
  );
  const seen = [];
  const app = express();
  app.get('/_test/requests', (request, response) => response.json(seen));
  app.use('/a2a', (request, response, next) => {
    // The SDK's handlers parse the body; the entry reads it from the request when it is shown.
    seen.push({
      method: request.method,
      path: request.originalUrl,
      headers: request.headers,
      get body() {
        return request.body ?? null;
      },
    });
    if (seen.length > KEPT_REQUESTS) seen.shift();
    next();
  });
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  const userBuilder = UserBuilder.noAuthentication;
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat }));
  app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder, legacyCompat }));
  return app;
}

const port = Number.parseInt(option('port', 'JS_AGENT_PORT', '0'), 10);
const versions = option('versions', 'JS_AGENT_VERSIONS', '1.0,0.3').split(',');
const server = http.createServer();
server.on('error', (error) => {
  console.error(`the JS agent could not listen: ${error.message}`);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  server.on('request', buildApp(url, versions));
  console.log(JSON.stringify({ ready: true, url, card: `${url}/${AGENT_CARD_PATH}` }));
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.closeAllConnections?.();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
