"""Which redirects a request follows (sparkwatch.httpopen): a GET to the same server only. A
redirect elsewhere would carry the bearer token to whoever the server names; a redirected POST
would arrive as a GET without its body."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench.local import QuietHandler, served
from sparkwatch.httpopen import (
    ResponseTooLarge,
    _same_server,
    open_http,
    read_http,
    request_failure,
)


@contextmanager
def server(redirect_to: str | None = None) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A server on 127.0.0.1 redirecting /start to ``redirect_to`` and answering anything else
    ``ok``; it records each path asked for with the Authorization header it came with."""
    seen: list[tuple[str, str | None]] = []

    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            seen.append((self.path, self.headers.get("Authorization")))
            if self.path == "/start" and redirect_to is not None:
                self.answer(302, b"", headers={"Location": redirect_to})
            else:
                self.answer(200, b"ok", "text/plain")

    with served(Handler) as url:
        yield url, seen


def get(url: str) -> bytes:
    return read_http(urllib.request.Request(url, headers={"Authorization": "Bearer s3cret"}), 5)


def test_a_redirect_to_another_path_on_the_same_server_is_followed() -> None:
    with server("/next") as (base, seen):
        assert get(f"{base}/start") == b"ok"
    assert [path for path, _ in seen] == ["/start", "/next"]


def test_a_redirect_to_another_server_is_not_followed_and_the_token_stays_home() -> None:
    with (server() as (elsewhere, theirs), server(f"{elsewhere}/steal") as (base, _),
          pytest.raises(urllib.error.HTTPError) as caught):
        get(f"{base}/start")
    assert caught.value.code == 302
    assert request_failure(caught.value) == "HTTP 302 Found"
    assert theirs == [], "the other server was never asked, so never saw the token"


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/etc/passwd", "file:///etc/passwd"])
def test_a_redirect_to_a_scheme_other_than_http_is_not_followed(target: str) -> None:
    with server(target) as (base, seen), pytest.raises(urllib.error.HTTPError):
        get(f"{base}/start")
    assert [path for path, _ in seen] == ["/start"]


def test_open_http_follows_the_same_rules() -> None:
    with (server() as (elsewhere, theirs), server(f"{elsewhere}/x") as (base, _),
          pytest.raises(urllib.error.HTTPError)):
        open_http(urllib.request.Request(f"{base}/start"), 5)
    assert theirs == []


@pytest.mark.parametrize(("url", "target", "same"), [
    ("http://h:8080/a", "http://h:8080/b", True),
    ("http://h/a", "https://h/b", True),  # an upgrade: port 80 becomes 443
    ("http://h:8080/a", "https://h:8080/b", True),
    ("http://h:8080/a", "https://h:9999/b", False),  # another server on the same host
    ("https://h/a", "http://h/b", False),  # a downgrade would send the token in clear
    ("http://h:8080/a", "http://h:9090/b", False),
    ("http://h/a", "http://other/b", False),
    ("http://h/a", "http://h:bad/b", False),
])
def test_what_counts_as_the_same_server(url: str, target: str, same: bool) -> None:
    assert _same_server(url, target) is same


def test_an_answer_longer_than_the_limit_is_refused_by_name() -> None:
    with server() as (base, _), pytest.raises(ResponseTooLarge) as caught:
        read_http(urllib.request.Request(f"{base}/any"), 5, limit=1)
    assert request_failure(caught.value) == "answered with more than 1 bytes"
