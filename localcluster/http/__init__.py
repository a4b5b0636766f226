"""The HTTP face: the aiohttp app, routing, handlers (CRUD, subresources, watch), discovery,
tables and printers, protobuf and content negotiation. The only layer that speaks aiohttp."""
