"""A static-file HTTP server for the HTTPStore tests, run as a subprocess.

``python tests/http_server.py --root DIR --port P`` serves ``DIR`` on 127.0.0.1 with
aiohttp's static handler: correct ``Range`` support (206 + ``Content-Range``, 416),
``HEAD``, and HTML directory indexes (``show_index=True``). Like nginx and Apache it
redirects a directory URL without a trailing slash to the one with it.

Fault-injection paths (the rest of the path maps into ``DIR`` as usual):

``/forbidden/...``        403 for everything at or below it (files stay on disk)
``/_status/<code>/...``   that status code for every request
``/_norange/...``         files sent whole with 200, ignoring ``Range`` (like ``python -m http.server``)
``/_nohead/...``          405 for ``HEAD``; ``GET`` works (with ``Range``)
``/_nolist/...``          files as usual, 404 for directories (an object store or CDN)
``/_badrange/...``        206 whose ``Content-Range`` does not match the bytes requested
``/_needauth/...``        401 unless ``Authorization`` is ``Bearer azarr-test-token`` or basic
                          auth ``azarr:azarr-secret``; then as usual (with ``Range``)
"""

from __future__ import annotations

import argparse
import base64
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(root: Path) -> web.Application:
    root = root.resolve()

    def local(rel: str) -> Path:
        """The file ``rel`` (URL-decoded, relative) names under ``root``; 404 outside it."""
        path = (root / rel.lstrip("/")).resolve()
        if path != root and not path.is_relative_to(root):
            raise web.HTTPNotFound()
        return path

    @web.middleware
    async def conventions(request: web.Request, handler: Handler) -> web.StreamResponse:
        parts = request.path.lstrip("/").split("/")
        if parts[0] == "forbidden":
            raise web.HTTPForbidden(text="forbidden by the test server")
        plain = not request.path.startswith("/_") and not request.path.endswith("/")
        if plain and local(request.path).is_dir():
            raw_path, sep, query = request.raw_path.partition("?")
            raise web.HTTPMovedPermanently(location=raw_path + "/" + sep + query)
        return await handler(request)

    def file_or_404(request: web.Request) -> Path:
        path = local(request.match_info["path"])
        if not path.is_file():
            raise web.HTTPNotFound()
        return path

    async def status(request: web.Request) -> web.StreamResponse:
        return web.Response(status=int(request.match_info["code"]), text="injected status")

    async def norange(request: web.Request) -> web.StreamResponse:
        body = file_or_404(request).read_bytes()
        return web.Response(body=body, content_type="application/octet-stream")

    async def nohead(request: web.Request) -> web.StreamResponse:
        if request.method == "HEAD":
            raise web.HTTPMethodNotAllowed("HEAD", ["GET"])
        return web.FileResponse(file_or_404(request))

    async def nolist(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(file_or_404(request))

    async def badrange(request: web.Request) -> web.StreamResponse:
        body = file_or_404(request).read_bytes()
        if "Range" not in request.headers:
            return web.Response(body=body)
        # Always the first two bytes, whatever was asked.
        return web.Response(status=206, body=body[:2], headers={"Content-Range": f"bytes 0-1/{len(body)}"})

    accepted = {"Bearer azarr-test-token", "Basic " + base64.b64encode(b"azarr:azarr-secret").decode()}

    async def needauth(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") not in accepted:
            raise web.HTTPUnauthorized(headers={"WWW-Authenticate": 'Basic realm="azarr"'})
        return web.FileResponse(file_or_404(request))

    app = web.Application(middlewares=[conventions])
    app.router.add_route("*", r"/_status/{code:\d+}/{path:.*}", status)
    app.router.add_route("*", "/_norange/{path:.*}", norange)
    app.router.add_route("*", "/_nohead/{path:.*}", nohead)
    app.router.add_route("*", "/_nolist/{path:.*}", nolist)
    app.router.add_route("*", "/_badrange/{path:.*}", badrange)
    app.router.add_route("*", "/_needauth/{path:.*}", needauth)
    app.router.add_static("/", root, show_index=True)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    # No access log: the tests make tens of thousands of requests. Short shutdown: the
    # fixture stops the server by SIGTERM and waits for it.
    web.run_app(
        make_app(args.root), host=args.host, port=args.port, access_log=None, print=None, shutdown_timeout=1
    )


if __name__ == "__main__":
    main()
