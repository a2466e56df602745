"""URIs of the A2A extensions the relay itself speaks. Plain constants: any layer may import
this module, including the pure cores."""

CLIENT_ROUTING_URI = "https://ranch.woi.dev/extensions/client-routing/v1"
