"""The pure A2A protocol layer of the gateway. Imports no Django.

Wire input (JSON-RPC or REST, A2A 1.0 or 0.3) becomes canonical 1.0 ProtoJSON dicts plus
the :class:`~tasks_app.protocol.versions.Operation` asked for; canonical results and
:class:`~tasks_app.protocol.errors.A2AError` go back out in the shape of the client's
binding and version.

- ``versions``: A2A-Version negotiation, operations, JSON-RPC method names, extensions.
- ``errors``: the error hierarchy, its JSON-RPC and REST renderings, and their parsing.
- ``protojson``: validation and normalisation of ProtoJSON dicts along the proto descriptors.
- ``validation``: validation of request params (1.0 and 0.3).
- ``objects``: A2A objects mapped between 1.0 and the 0.3 dialects.
- ``convert``: 0.3 <-> 1.0 conversion per operation (requests, results, stream events).
- ``card_conversion``: agent cards between 0.3, 1.0 and the hybrid card.
- ``jsonrpc``: the JSON-RPC binding.
- ``rest``: the HTTP+JSON binding and its routes.
"""
