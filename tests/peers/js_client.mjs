// The @a2a-js/sdk client, run by node from the project's var/node-a2a-js (see tests/jsdk.py).
//
// Reads one JSON request on stdin, prints one JSON answer on stdout:
// - {"url", "token", "transport": "JSONRPC" | "HTTP+JSON", "text"}: discovers the agent from
//   its card at `url` (ClientFactory.createFromUrl, the SDK's usual way in), sends `text` and
//   answers {"card": <the card as the SDK normalized it>, "result": <what sendMessage returned>}.
// An exception becomes {"error": "..."} with exit status 1.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver,
  JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers || {});
  if (request.token) headers.set("Authorization", `Bearer ${request.token}`);
  return fetch(url, { ...init, headers });
};

try {
  const resolver = new DefaultAgentCardResolver({ fetchImpl });
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    preferredTransports: [request.transport],
    cardResolver: resolver,
  }));
  const card = await resolver.resolve(request.url);
  const client = await factory.createFromUrl(request.url);
  const result = await client.sendMessage({
    message: { messageId: `js-${Date.now()}`, role: 1, parts: [{ content: { $case: "text", value: request.text } }] },
  });
  process.stdout.write(JSON.stringify({ card, result }, (key, value) =>
    typeof value === "bigint" ? value.toString() : value));
} catch (error) {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exitCode = 1;
}
