// Drives an A2A agent with the official @a2a-js/sdk client, for the relay's interop tests.
//
//   echo '{"agent_url": "...", "binding": "JSONRPC", "operations": [...]}' | node client.js
//
// Reads one JSON object on stdin:
//   agent_url   the agent's base URL (its card is at <agent_url>/.well-known/agent-card.json),
//   card_url    or the card's full URL instead,
//   binding     "JSONRPC" or "HTTP+JSON": the client keeps only the card's interfaces of it,
//   version     optional "1.0" or "0.3": and only those of this protocol version,
//   headers     optional HTTP headers sent with every request (the card fetch too),
//   discover    optional true: the client is made by the SDK's own discovery
//               (ClientFactory.createFromUrl, the binding preferred) instead of from the card
//               kept to that binding and version,
//   timeout_ms  optional bound of each operation (default 20000),
//   operations  a list run in order; each is an object with "op" and its parameters:
//     send      {message | text, taskId, contextId, configuration, metadata}  SendMessage
//     stream    the same, SendStreamingMessage
//     get       {id, historyLength}                                         GetTask
//     list      {params}  (a ListTasksRequest)                               ListTasks
//     cancel    {id}                                                         CancelTask
//     subscribe {id}                                                         SubscribeToTask
//     push_set  {config}  (a TaskPushNotificationConfig)
//     push_get  {taskId, id}       push_list {taskId}       push_delete {taskId, id}
//     card      the extended card when the card offers one, else the card
//     await     {index, events}: waits until operation `index` (run with "background": true)
//               has sent that many events, or ended when `events` is absent
//   Every operation may also have "headers" (this call only), "timeout_ms" and "background"
//   (start it and go on to the next one at once). A value {"$ref": "N.path.to.value"} is
//   replaced by what operation N produced: "N.result...", "N.events.K...", "N.error...".
//
// Prints JSON lines, the SDK's values as the A2A 1.0 JSON of their protobuf types:
//   {"kind": "client", "binding", "protocolVersion", "url", "card"}
//                                                               the interface the client chose,
//                                                               and the card as the SDK read it
//   {"op": i, "kind": "event", "event": StreamResponse}         each streamed event, in order
//   {"op": i, "kind": "result", "result": ...}                  a unary answer (send: {task} or
//                                                                {message}; delete: null)
//   {"op": i, "kind": "error", "error": {name, message, code, status, reason}}
//   {"op": i, "kind": "end"}                                    a stream ended
// Exits 0 when every operation was run (whatever each answered), 2 when the client could not
// be made (the error line says why).

import process from 'node:process';

import {
  AGENT_CARD_PATH,
  AgentCard,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

const DEFAULT_TIMEOUT_MS = 20000;

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** An SDK error (or any thrown value) as plain JSON: its type, code and HTTP status. */
export function describeError(error) {
  return {
    name: error?.name ?? typeof error,
    message: error?.message ?? String(error),
    code: error?.envelopeCode ?? error?.code ?? null,
    status: error?.statusCode ?? null,
    reason: error?.reason ?? null,
  };
}

function withHeaders(headers) {
  return (input, init = {}) => {
    const merged = new Headers(init.headers ?? (input instanceof Request ? input.headers : {}));
    for (const [name, value] of Object.entries(headers)) {
      if (!merged.has(name)) merged.set(name, value);
    }
    return fetch(input, { ...init, headers: merged });
  };
}

async function makeClient(spec) {
  const fetchImpl = withHeaders(spec.headers ?? {});
  const legacyCompat = { enabled: true };
  const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat });
  const [base, path] = spec.card_url
    ? [spec.card_url, '']
    : [spec.agent_url.replace(/\/?$/, '/'), AGENT_CARD_PATH];
  const card = await resolver.resolve(base, path);
  const keep = card.supportedInterfaces.filter(
    (entry) =>
      entry.protocolBinding === spec.binding &&
      (!spec.version || entry.protocolVersion.startsWith(spec.version))
  );
  if (keep.length === 0) {
    const offered = card.supportedInterfaces.map((e) => `${e.protocolBinding} ${e.protocolVersion}`);
    throw new Error(
      `the card offers no ${spec.binding} ${spec.version ?? ''} interface (it offers: ${offered.join(', ')})`
    );
  }
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [
        new JsonRpcTransportFactory({ fetchImpl, legacyCompat }),
        new RestTransportFactory({ fetchImpl, legacyCompat }),
      ],
      preferredTransports: [spec.binding],
      cardResolver: resolver,
    })
  );
  const client = spec.discover
    ? await factory.createFromUrl(base, path)
    : await factory.createFromAgentCard({ ...card, supportedInterfaces: keep });
  return { client, card, url: keep[0].url };
}

function lookup(records, reference) {
  const [index, ...path] = reference.split('.');
  let value = records[Number(index)];
  for (const key of path) {
    if (value === undefined || value === null) break;
    value = value[key];
  }
  if (value === undefined) throw new Error(`{"$ref": "${reference}"} names nothing`);
  return value;
}

function resolveRefs(value, records) {
  if (Array.isArray(value)) return value.map((item) => resolveRefs(item, records));
  if (value && typeof value === 'object') {
    if (Object.keys(value).length === 1 && typeof value.$ref === 'string') {
      return lookup(records, value.$ref);
    }
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, resolveRefs(item, records)])
    );
  }
  return value;
}

function sendRequest(operation) {
  const message = {
    messageId: crypto.randomUUID(),
    role: 'ROLE_USER',
    ...(operation.text !== undefined ? { parts: [{ text: operation.text }] } : {}),
    ...(operation.taskId ? { taskId: operation.taskId } : {}),
    ...(operation.contextId ? { contextId: operation.contextId } : {}),
    ...(operation.message ?? {}),
  };
  return SendMessageRequest.fromJSON({
    message,
    ...(operation.configuration ? { configuration: operation.configuration } : {}),
    ...(operation.metadata ? { metadata: operation.metadata } : {}),
  });
}

function sendResult(result) {
  return result.messageId !== undefined
    ? { message: Message.toJSON(result) }
    : { task: Task.toJSON(result) };
}

const UNARY = {
  send: async (client, op, options) => sendResult(await client.sendMessage(sendRequest(op), options)),
  get: async (client, op, options) =>
    Task.toJSON(
      await client.getTask(
        { id: op.id, tenant: '', ...(op.historyLength !== undefined ? { historyLength: op.historyLength } : {}) },
        options
      )
    ),
  list: async (client, op, options) =>
    ListTasksResponse.toJSON(await client.listTasks(ListTasksRequest.fromJSON(op.params ?? {}), options)),
  cancel: async (client, op, options) =>
    Task.toJSON(await client.cancelTask({ id: op.id, tenant: '', metadata: op.metadata }, options)),
  push_set: async (client, op, options) =>
    TaskPushNotificationConfig.toJSON(
      await client.createTaskPushNotificationConfig(
        TaskPushNotificationConfig.fromJSON(op.config),
        options
      )
    ),
  push_get: async (client, op, options) =>
    TaskPushNotificationConfig.toJSON(
      await client.getTaskPushNotificationConfig({ taskId: op.taskId, id: op.id, tenant: '' }, options)
    ),
  push_list: async (client, op, options) =>
    ListTaskPushNotificationConfigsResponse.toJSON(
      await client.listTaskPushNotificationConfig(
        { taskId: op.taskId, tenant: '', pageSize: op.pageSize ?? 0, pageToken: op.pageToken ?? '' },
        options
      )
    ),
  push_delete: async (client, op, options) => {
    await client.deleteTaskPushNotificationConfig({ taskId: op.taskId, id: op.id, tenant: '' }, options);
    return null;
  },
  card: async (client, op, options) => AgentCard.toJSON(await client.getAgentCard(options)),
};

const STREAMING = {
  stream: (client, op, options) => client.sendMessageStream(sendRequest(op), options),
  subscribe: (client, op, options) => client.resubscribeTask({ id: op.id, tenant: '' }, options),
};

async function run(client, index, operation, record, spec) {
  const timeout = operation.timeout_ms ?? spec.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  const options = { signal: AbortSignal.timeout(timeout) };
  if (operation.headers) options.serviceParameters = operation.headers;
  try {
    if (operation.op in STREAMING) {
      for await (const event of STREAMING[operation.op](client, operation, options)) {
        const json = StreamResponse.toJSON(event);
        record.events.push(json);
        print({ op: index, kind: 'event', event: json });
      }
      print({ op: index, kind: 'end' });
    } else if (operation.op in UNARY) {
      record.result = await UNARY[operation.op](client, operation, options);
      print({ op: index, kind: 'result', result: record.result });
    } else {
      throw new Error(`unknown operation "${operation.op}"`);
    }
  } catch (error) {
    record.error = describeError(error);
    print({ op: index, kind: 'error', error: record.error });
    if (operation.op in STREAMING) print({ op: index, kind: 'end' });
  }
}

async function awaitOperation(operation, records, running, timeout) {
  const deadline = Date.now() + timeout;
  const target = records[operation.index];
  while (Date.now() < deadline) {
    if (operation.events === undefined) {
      await running[operation.index];
      return;
    }
    if (target.events.length >= operation.events || target.done) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`operation ${operation.index} did not get there within ${timeout} ms`);
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const spec = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  let made;
  try {
    made = await makeClient(spec);
  } catch (error) {
    print({ op: null, kind: 'error', error: describeError(error) });
    process.exitCode = 2;
    return;
  }
  const { client, card, url } = made;
  print({
    kind: 'client',
    binding: client.transport.protocolName,
    protocolVersion: client.protocolVersion,
    url,
    card: AgentCard.toJSON(card),
  });
  const records = [];
  const running = [];
  for (const [index, raw] of (spec.operations ?? []).entries()) {
    const record = { events: [], result: undefined, error: undefined, done: false };
    records.push(record);
    let operation;
    try {
      operation = resolveRefs(raw, records);
    } catch (error) {
      record.error = describeError(error);
      record.done = true;
      print({ op: index, kind: 'error', error: record.error });
      running.push(Promise.resolve());
      continue;
    }
    if (operation.op === 'await') {
      const timeout = operation.timeout_ms ?? spec.timeout_ms ?? DEFAULT_TIMEOUT_MS;
      const waited = awaitOperation(operation, records, running, timeout).then(
        () => print({ op: index, kind: 'result', result: null }),
        (error) => print({ op: index, kind: 'error', error: describeError(error) })
      );
      running.push(waited);
      await waited;
      record.done = true;
      continue;
    }
    const started = run(client, index, operation, record, spec).finally(() => {
      record.done = true;
    });
    running.push(started);
    if (!operation.background) await started;
  }
  await Promise.all(running);
}

main().catch((error) => {
  print({ op: null, kind: 'error', error: describeError(error) });
  process.exitCode = 2;
});
