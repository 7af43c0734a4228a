"""A request's deadline holds for the name lookup too (sparkwatch.httpopen): getaddrinfo has no
timeout of its own, and a DNS server that never answers held the push thread for as long as the
system's resolver waited, whatever the push timeout said. So did ``open_http`` (a local
collector's start) and the OTLP exporter's session (sparkwatch.otlp.transport), which now look
names up through the same Resolver.

The DNS servers here are real UDP sockets, in a network and mount namespace of the test's own
(``unshare``, as root): the child process sees a resolv.conf naming 127.0.0.1, its own loopback,
bound over the machine's file in that namespace only. The machine's resolver is never touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

RESOLVER_WAITS = 8
"""Seconds the resolver waits for an answer (resolv.conf ``options timeout``): far above the
requests' deadline of one second."""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or not sys.platform.startswith("linux"),
    reason="needs root and unshare for a resolver of its own")

CHILD_COMMON = """
import json, socket, struct, threading, time, urllib.request
from sparkwatch.httpopen import read_http_answer, request_failure

NAME = "collector.sparkwatch.test"
answering = threading.Event()

def dns_server() -> None:
    # Answers A queries for any name with 127.0.0.1 while `answering` is set; silent otherwise.
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 53))
    while True:
        query, peer = sock.recvfrom(512)
        if not answering.is_set():
            continue
        end = query.index(b"\\0", 12) + 5
        qtype = struct.unpack("!H", query[end - 4:end - 2])[0]
        record = (b"\\xc0\\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
                  if qtype == 1 else b"")
        header = query[:2] + struct.pack("!HHHHH", 0x8180, 1, 1 if record else 0, 0, 0)
        sock.sendto(header + query[12:end] + record, peer)

threading.Thread(target=dns_server, daemon=True).start()

def answered(url: str, data: bytes | None) -> str:
    status, _ = read_http_answer(urllib.request.Request(url, data), 1.0)
    return f"HTTP {status}"

def timed(url: str, data: bytes | None = None, send=answered, say=request_failure) -> dict:
    # What `send` made of the request to `url` (or `say` of its error), and how long it took.
    start = time.monotonic()
    try:
        said = send(url, data)
    except Exception as exc:
        said = say(exc)
    return {"seconds": time.monotonic() - start, "said": said}
"""

SERVER = """
import http.server

class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.do_GET()

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
threading.Thread(target=server.serve_forever, daemon=True).start()
PORT = server.server_address[1]
"""

SILENT = CHILD_COMMON + """
from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters

url = f"http://{NAME}:9750/api/v1/events"
requests = [timed(url, b"{}") for _ in range(2)]
counters = ListenerCounters()
push = PushSink(Endpoint(url, None, 1.0), counters, capacity=10, batch_size=5,
                flush_seconds=0.01, backoff=(5.0, 5.0))
start = time.monotonic()
push.offer_wire({"name": "one"})
while not counters.delivery_failures and time.monotonic() - start < 30:
    time.sleep(0.02)
first_failure = time.monotonic() - start
push.stop(1)
print(json.dumps({"requests": requests, "first_failure": first_failure,
                  "lookups": sum(t.name == "sparkwatch-resolve" for t in threading.enumerate())}))
"""

CACHED = CHILD_COMMON + SERVER + """
url = f"http://{NAME}:{PORT}/"
answering.set()
first = timed(url)
answering.clear()
print(json.dumps({"answered": first, "silent": timed(url)}))
"""

OPEN_HTTP = CHILD_COMMON + SERVER + """
from sparkwatch.httpopen import open_http

def opened(url: str, data: bytes | None) -> str:
    with open_http(urllib.request.Request(url, data), 1.0) as response:
        return f"HTTP {response.status} {response.read().decode()}"

answering.set()
first = timed(f"http://{NAME}:{PORT}/", send=opened)
answering.clear()
print(json.dumps({"answered": first,
                  "silent": timed(f"http://silent.sparkwatch.test:{PORT}/", send=opened)}))
"""

OTLP = CHILD_COMMON + SERVER + """
from sparkwatch.otlp.transport import BoundedSession

session = BoundedSession()

def posted(url: str, data: bytes | None) -> str:
    # As the SDK's OTLP/HTTP exporter sends: a POST with the time left as its timeout.
    response = session.post(url, data=data, timeout=1.0)
    return f"HTTP {response.status_code} {response.content.decode()}"

answering.set()
first = timed(f"http://{NAME}:{PORT}/v1/metrics", b"metrics", send=posted, say=str)
answering.clear()
silent = timed(f"http://silent.sparkwatch.test:{PORT}/v1/metrics", b"metrics", send=posted,
               say=str)
print(json.dumps({"answered": first, "silent": silent}))
"""


def in_namespace(tmp_path: Path, code: str) -> dict[str, Any]:
    """``code`` run by python in a network and mount namespace of its own, whose resolv.conf
    names 127.0.0.1 (waiting RESOLVER_WAITS seconds for an answer); what it printed, as JSON."""
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(f"nameserver 127.0.0.1\noptions timeout:{RESOLVER_WAITS} attempts:1\n")
    script = tmp_path / "child.py"
    script.write_text(code)
    shell = (f"ip link set lo up && mount --bind {resolv} /etc/resolv.conf && "
             f"exec {sys.executable} {script}")
    done = subprocess.run(["unshare", "--mount", "--net", "sh", "-c", shell],
                          capture_output=True, text=True, timeout=120, check=False,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_dns_server_that_never_answers_holds_a_request_no_longer_than_its_deadline(
    tmp_path: Path,
) -> None:
    # The old code waited the resolver's own time (8 s here) for each request, and the push
    # sink counted its first failed attempt only then.
    result = in_namespace(tmp_path, SILENT)
    for request in result["requests"]:
        assert request["seconds"] < 2.5, result
        assert "DNS" in request["said"], result
    assert result["first_failure"] < 2.5, result
    # The second request waits on the lookup still under way: one thread, never one a request.
    assert result["lookups"] <= 1, result


def test_a_dns_server_gone_silent_leaves_the_last_address_it_gave(tmp_path: Path) -> None:
    result = in_namespace(tmp_path, CACHED)
    assert result["answered"]["said"] == "HTTP 200", result
    assert result["silent"]["said"] == "HTTP 200", result
    assert result["silent"]["seconds"] < 2.0, result  # half the 1 s deadline, then the cache


def test_open_http_waits_for_a_dns_server_that_never_answers_no_longer_than_its_timeout(
    tmp_path: Path,
) -> None:
    # The old open_http (a local collector's start polls with it) waited the resolver's own 8 s.
    result = in_namespace(tmp_path, OPEN_HTTP)
    assert result["answered"]["said"] == "HTTP 200 ok", result  # the answer still read after
    assert result["silent"]["seconds"] < 2.5, result
    assert result["silent"]["said"] == "no answer from DNS within 1 s", result


def test_the_otlp_session_waits_for_a_dns_server_that_never_answers_no_longer_than_its_timeout(
    tmp_path: Path,
) -> None:
    # The old session's urllib3 connection waited the resolver's own 8 s, whatever the timeout.
    result = in_namespace(tmp_path, OTLP)
    assert result["answered"]["said"] == "HTTP 200 ok", result
    assert result["silent"]["seconds"] < 2.5, result
    assert "Failed to resolve 'silent.sparkwatch.test'" in result["silent"]["said"], result
    assert "no answer from DNS within" in result["silent"]["said"], result  # the time left
