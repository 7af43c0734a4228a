"""What every route module shares: error answers, the bearer scheme, the auth dependencies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer

from sparkwatch.collector import models
from sparkwatch.collector.request_context import current_request_id
from sparkwatch.collector.service import Service

bearer = HTTPBearer(auto_error=False, description="Ingest token (per app) or read token.")
# Declares the bearer scheme in OpenAPI; the handlers check the header themselves (exact errors).
BEARER = Security(bearer)


def error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    """An error answer: what was wrong, in one line, and the request's id (also in the logs)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if status == 408:
        headers["Connection"] = "close"  # the rest of a trickled body is not waited for
    return JSONResponse({"detail": message, "request_id": current_request_id()},
                        status_code=status, headers=headers)


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": models.Error} for code in codes}


def read_auth(service: Service) -> list[Any]:
    """The dependency guarding reads: only declared (in OpenAPI too) when a read token is set."""
    return _guard(service.auth.reads_protected, service.auth.check_read)


def scrape_auth(service: Service) -> list[Any]:
    """/metrics: the scrape token or the admin read token, when either is set."""
    return _guard(service.auth.scrape_protected, service.auth.check_scrape)


def _guard(protected: bool, check_header: Callable[[str | None], None]) -> list[Any]:
    """A dependency passing the Authorization header to ``check_header`` (which raises on a
    wrong token), or none when nothing is protected (no bearer scheme in OpenAPI then). Checked
    on the event loop (a comparison in memory): not on a thread of the pool ingest uses."""
    if not protected:
        return []

    async def check(request: Request, _: Any = BEARER) -> None:
        check_header(request.headers.get("authorization"))

    return [Depends(check)]


def read_scope(service: Service) -> Any:
    """The tenant a read answers for (None: every tenant), from the caller's read token."""

    async def scope(request: Request) -> str | None:
        return service.auth.read_scope(request.headers.get("authorization"))

    return Depends(scope)
