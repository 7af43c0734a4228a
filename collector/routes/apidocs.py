"""The OpenAPI docs page (``/docs``), served with Swagger UI from the collector itself.

FastAPI's default page loads Swagger UI from a CDN, unpinned and without integrity checks: a page
where an operator types a token would run whatever that CDN served, and it stays blank on a
collector without internet access. Here the scripts come from the installed ``fastapi-offline``
package (Swagger UI 5, which reads the OpenAPI 3.1 FastAPI writes), and the page's policy allows
its own origin plus the one inline script it has, by hash.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

DOCS_PATH = "/docs"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}
"""The only files of the bundle the page needs, and so the only ones served."""


def _page(title: str, openapi_url: str) -> tuple[bytes, str]:
    """The page and its Content-Security-Policy, which names its inline script by its hash."""
    assets = f"{DOCS_PATH}/assets"
    html = get_swagger_ui_html(
        openapi_url=openapi_url, title=title,
        swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css",
        swagger_favicon_url=f"{assets}/favicon.png",
    ).body
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
        for script in re.findall(rb"<script>(.*?)</script>", html, re.S)
    )
    policy = (f"default-src 'none'; script-src 'self' {hashes}; style-src 'self'; "
              "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
              "base-uri 'none'; form-action 'none'")
    return bytes(html), policy


def router(title: str, openapi_url: str = "/openapi.json") -> APIRouter:
    routes = APIRouter(include_in_schema=False)
    html, policy = _page(title, openapi_url)
    root = Path(str(resources.files("fastapi_offline") / "static"))

    @routes.api_route(DOCS_PATH, methods=["GET", "HEAD"])
    def docs() -> HTMLResponse:
        return HTMLResponse(html, headers={"Content-Security-Policy": policy})

    @routes.api_route(DOCS_PATH + "/assets/{name}", methods=["GET", "HEAD"])
    def asset(name: str) -> FileResponse:
        if name not in ASSETS:  # a fixed list: no path from the request reaches the file system
            raise HTTPException(404, "no such docs asset")
        return FileResponse(root / name, media_type=ASSETS[name],
                            headers={"Cache-Control": "public, max-age=86400"})

    return routes
