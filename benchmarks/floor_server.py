"""The benchmark floor: a bare aiohttp HTTPS server answering a constant AdmissionReview.

Same TLS settings, same certificate and the same body-size limit as the webhook, and it reads
the whole request body, so the difference to the webhook is the admission work itself (JSON,
policies, metrics), not transport. Usage: python benchmarks/floor_server.py CERT_DIR PORT
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from aiohttp import web

from webhook.tls import server_context

BODY = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "00000000-0000-0000-0000-000000000000", "allowed": True},
    }
).encode()


async def answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=BODY, content_type="application/json")


async def main(cert_dir: Path, port: int) -> None:
    app = web.Application(client_max_size=7 * 1024 * 1024)
    app.router.add_post("/mutate", answer)
    app.router.add_post("/validate", answer)
    app.router.add_get("/healthz", lambda r: web.Response(text="ok\n"))
    ctx = server_context()
    ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx, backlog=1024).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
