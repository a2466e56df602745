"""The gRPC binding of A2A 1.0: the ``lf.a2a.v1.A2AService`` of a2a-sdk's ``a2a.proto``,
served by ``manage.py run_grpc`` (a ``grpc.aio`` server beside daphne) for every registered
agent and team and for the relay's own endpoint.

- ``targets``: which target a call is for (the request's ``tenant``), and the ``GRPC``
  interface the relay's cards list;
- ``service``: the servicer, which runs every call through the same admission and gateway
  operations as the JSON-RPC and HTTP+JSON endpoints (``tasks_app.api.calls``);
- ``server``: the server itself;
- ``upstream``: calling agents that speak gRPC;
- ``values``: protobuf messages as JSON dicts, integral Struct numbers back to ints.
"""
