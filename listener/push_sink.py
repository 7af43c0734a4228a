"""Pushes events to a sparkwatch collector from a background thread: batched, gzip, retried.

Standard library only (a Spark driver cannot afford a web stack). Events wait in a bounded memory
queue; past its capacity the oldest are dropped and counted. A failed POST (refused, reset, no
answer within the timeout, an HTTP error) is retried with exponential backoff and jitter; a 429 or
503 with ``Retry-After`` is retried after that long instead (at least the backoff's first wait,
at most its ceiling); a 429 without it (the collector's cardinality limit) is refused. Only the
collector's own answers count as a delivery (its count of accepted events) or as a refusal (its
error, or its 429, naming the request): anything else at the URL (a proxy's page, another service)
is a failed attempt, retried. A 413 (a body limit, the collector's or a proxy's) has the batch
sent again in smaller requests, and the requests that follow packed under the size learnt; an
event alone over a size refused is refused without being sent. What a server answers is logged
on one short line, refusals at most once a minute.
With a spool directory, a batch that failed goes to a bounded disk spool instead, and so does
everything behind it, keeping the order; the spool is sent first once the collector answers again,
and what it holds survives a driver restart. Nothing here runs on Spark's callback thread: the
intake's worker hands events over with a non-blocking offer.

Counted (per sink ``push``): delivered events, failed attempts (each is retried), and drops by
stage: ``push`` (memory queue full, or unsent at detach without a spool), ``push_spool`` (spool
full, or its disk refused the write: full, I/O error), ``push_refused`` (the collector refused
them as invalid or over a limit; resending cannot help). A redelivered batch is harmless: the
collector ignores what it already counted.
"""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Any

from sparkwatch.httpopen import read_http_answer, request_failure
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.answers import is_collector_error, is_ingest_result
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import envelope_to_dict
from sparkwatch.plan.wire import is_plan_item
from sparkwatch.redact import redact_url
from sparkwatch.spool import Spool, SpoolUnavailable
from sparkwatch.version import __version__
from sparkwatch.worker import Backoff, BoundedQueue, Worker

log = logging.getLogger(__name__)
STOP_RESERVE_SECONDS = 0.5
"""Of a stop's timeout, kept to spool what could not be sent."""

_STOP = None
Wire = dict[str, Any]
# Our request was wrong: the same bytes will be refused again (when the collector says so).
PERMANENT = frozenset({400, 415, 422})
# "Not now": with a Retry-After, the server says when to send the same batch again.
COME_BACK = frozenset({429, 503})
FAILURE_REMINDER_SECONDS = 300.0
"""During an outage, the failure is said again (every 20th attempt) at most this often: a server
answering "Retry-After: 1" to every POST made a line every 20 s for as long as it lasted."""
REFUSED_LOG_SECONDS = 60.0
"""Refusals are said at most once in this long, with how many came since: a server answering
413 to everything had the sink split a batch of 500 down to single events, one line each."""
DETAIL_CHARS = 200
"""Characters of a server's reason shown in a log line: one line, whatever the server sent (a
100 KB reason with line breaks in it made one warning look like many, of the server's making)."""
REPLY_LIMIT = 4 << 20
"""Bytes of a collector's answer read at most: a batch's reply (a count and the refused events'
reasons) is a few kilobytes; a server answering more is not a collector, and would otherwise
fill the driver's memory."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What a server answered: its body when it is a JSON object (None when it is not JSON, or
    JSON of another kind: it is then no answer of the collector's), and its text, the start of
    the body (or our words for a POST that got no answer), for a log line."""

    body: dict[str, Any] | None
    text: str

    def said(self) -> str:
        """The server's words, cut short for one log line: a JSON answer's ``detail`` when it
        is text, else the start of the body as it came (an HTML page, a JSON of another shape)."""
        detail = self.body.get("detail") if self.body is not None else None
        return _shown(detail if isinstance(detail, str) else self.text)


class Sent(Enum):
    OK = "ok"
    RETRY = "retry"
    SMALLER = "smaller"
    """Refused as too large (413): to be sent again in smaller requests."""


_BATCH_START, _BATCH_END = b'{"events":[', b"]}"
SIZE_MEMORY_SECONDS = 600.0
"""How long a body size refused with 413 is kept: a limit raised (or a proxy taken away) gets
whole batches again at most this long after the last refusal."""


@dataclass(frozen=True, slots=True)
class BodySize:
    gzip: int
    """Bytes as sent: what a proxy's limit counts."""
    json: int
    """Bytes once inflated: what the collector's limit counts too."""

    def __str__(self) -> str:
        return f"{self.json} bytes ({self.gzip} gzip)"


class BodySizes:
    """What the body limit in front of the collector (its own, or a proxy's) was seen to take:
    the smallest request refused with 413 and the largest taken below it. Requests are packed
    under the larger of what was taken and half of what was refused (halving finds a limit with
    a few refusals, and what is learnt holds for the batches that follow: halving each batch
    again made 2N-1 POSTs for N events under a limit of one). An event alone over the size of
    one refused alone, in both measures (whichever the limit counts), is refused without being
    sent; a size refused to several events proves no more (the collector's 413 may be of their
    number, max_events_per_request)."""

    def __init__(self) -> None:
        self._refused: dict[bool, BodySize] = {}
        """The smallest size refused, to one event alone (True) and to any request (False)."""
        self._refused_at = 0.0
        self._taken = 0
        """JSON bytes of the largest request taken below the smallest refused."""

    def fitting(self, encoded: list[bytes]) -> int:
        """How many of ``encoded`` (events as JSON) one request takes: at least one."""
        refused = self._remembered(alone=False)
        if refused is None:
            return len(encoded)
        target = max(self._taken, refused.json // 2)
        size, n = len(_BATCH_START) + len(_BATCH_END) - 1, 0  # the last event has no comma
        for event in encoded:
            size += len(event) + 1
            if n and size > target:
                break
            n += 1
        return n

    def over(self, size: BodySize) -> BodySize | None:
        """The size refused to an event alone that one of ``size`` is not under, if any (a body
        limit counts one of the two measures: over both is over it, whichever it is)."""
        refused = self._remembered(alone=True)
        over = refused is not None and size.gzip >= refused.gzip and size.json >= refused.json
        return refused if over else None

    def took(self, size: BodySize) -> None:
        for alone, refused in list(self._refused.items()):
            if size.gzip >= refused.gzip and size.json >= refused.json:
                del self._refused[alone]  # the limit was raised: what was learnt no longer holds
        below = self._refused.get(False)
        if below is not None and size.json < below.json:
            self._taken = max(self._taken, size.json)

    def too_large(self, size: BodySize, alone: bool) -> None:
        for kind in {alone, False}:
            old = self._refused.get(kind, size)
            self._refused[kind] = BodySize(min(old.gzip, size.gzip), min(old.json, size.json))
        self._refused_at = time.monotonic()
        if self._taken >= self._refused[False].json:
            self._taken = 0  # the limit was lowered

    def _remembered(self, alone: bool) -> BodySize | None:
        if time.monotonic() - self._refused_at > SIZE_MEMORY_SECONDS:
            self._refused.clear()
        return self._refused.get(alone)


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    token: str | None
    timeout: float
    """Seconds for one whole POST: connecting, sending, and reading the answer to its end (a
    silent server, and one dripping its answer a byte at a time, are both cut off)."""


class PushSink:
    QUEUE = "push"

    def __init__(
        self,
        endpoint: Endpoint,
        counters: ListenerCounters,
        capacity: int,
        batch_size: int,
        flush_seconds: float,
        spool: Spool | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        self._endpoint = endpoint
        self._url = _without_userinfo(endpoint.url)
        """Where the POST goes: the URL without a ``user:password@`` (see _without_userinfo)."""
        self._counters = counters
        self._batch_size = batch_size
        self._flush_seconds = flush_seconds
        self._spool = spool
        self._backoff = Backoff(*backoff)
        self._sizes = BodySizes()
        self._next_wait = 0.0
        """Before the next attempt: the backoff's, or the server's Retry-After."""
        self._refused_said_at: float | None = None
        self._refused_unsaid = 0
        """Refused events not yet said (see REFUSED_LOG_SECONDS)."""
        self._failure_said_at = 0.0
        """When an outage was last said (see FAILURE_REMINDER_SECONDS)."""
        self._queue: BoundedQueue[Wire | None] = BoundedQueue(capacity)
        self._deadline: float | None = None
        self._stop_seen = False
        self._wake = threading.Event()
        self.worker = Worker("push", self._run, "sparkwatch-push")
        self.worker.start()

    # --- called from other threads ----------------------------------------------------------

    def __call__(self, event: ParsedEvent) -> None:
        """Never blocks: when memory is full the oldest waiting event makes room."""
        if self._deadline is not None:
            self._counters.count_dropped(self.QUEUE)
        elif evicted := self._queue.offer_evicting(envelope_to_dict(event.envelope)):
            self._counters.count_dropped(self.QUEUE, evicted)

    def offer_wire(self, item: Wire) -> None:
        """Queue an entry already in its wire form (a run's plan, see
        :mod:`sparkwatch.plan.wire`) behind the events; never blocks, as :meth:`__call__`."""
        if self._deadline is not None:
            self._counters.count_dropped(self.QUEUE)
        elif evicted := self._queue.offer_evicting(item):
            self._counters.count_dropped(self.QUEUE, evicted)

    def queue_state(self) -> tuple[int, int]:
        return self._queue.size(), self._queue.capacity

    def held(self) -> int:
        """Entries queued or in the batch being sent (a run's plan too), the stop not counted:
        said at detach when the sink is still busy at its deadline."""
        return self._queue.unfinished()

    def flush(self, timeout: float) -> bool:
        """Wait until everything received so far was delivered (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        if not self._queue.wait_drained(timeout):
            return False
        while self._spool is not None and not self._spool.is_empty():
            if time.monotonic() > deadline:
                return False
            self._wake.set()
            time.sleep(0.02)
        return True

    def stop(self, timeout: float) -> None:
        """Deliver what is queued within ``timeout``; then spool the rest (or count it dropped).
        Returns by then: a POST still waiting for its answer is left to the daemon thread, which
        closes the spool when it ends."""
        end = time.monotonic() + timeout
        # Sending stops a little before the end, leaving time to spool what is left.
        self._deadline = end - min(STOP_RESERVE_SECONDS, timeout / 4)
        self._wake.set()
        self._queue.put_control(_STOP, timeout)
        self.worker.join(max(0.0, end - time.monotonic()))

    # --- the sender thread ------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop_seen:
            if self._spool is not None and not self._spool.is_empty():
                try:
                    self._spill()
                    self._send_spooled()
                except OSError as exc:  # the spool's disk cannot be read: keep going, later
                    self._counters.count_error("push_spool")
                    log.error("sparkwatch: cannot read the push spool %s: %s",
                              self._spool.directory, exc)
                    self._pause()
            else:
                batch = self._next_batch()
                if batch:
                    self._send_fresh(batch)
            self.worker.beat()
        self._finish()
        if self._spool is not None:
            self._spool.close()

    def _stopping(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _next_batch(self) -> list[Wire]:
        """Block for one event, then gather more for up to flush_seconds or batch_size."""
        first = self.worker.take(self._queue)
        if first is _STOP:
            self._queue.done()
            self._stop_seen = True
            return []
        batch = [first]
        deadline = time.monotonic() + self._flush_seconds
        while len(batch) < self._batch_size:
            try:
                item = self.worker.take(self._queue, deadline - time.monotonic())
            except queue.Empty:
                break
            if item is _STOP:
                self._queue.done()
                self._stop_seen = True
                break
            batch.append(item)
        return batch

    def _send_fresh(self, batch: list[Wire]) -> None:
        """Send a batch from memory; on failure spool it, or retry it until it goes."""
        try:
            if self._stopping() and self._spool is None:
                self._counters.count_dropped(self.QUEUE, len(batch))
                return
            left = batch
            while True:
                sent, settled = self._send(left)
                left = left[settled:]
                if sent is Sent.OK:
                    return
                if self._spool is not None:
                    self._to_spool(left)
                    return
                if self._stopping():
                    self._counters.count_dropped(self.QUEUE, len(left))
                    return
                self._pause()
        finally:
            self._queue.done(len(batch))

    def _send_spooled(self) -> None:
        assert self._spool is not None
        records, position = self._spool.read(self._batch_size)
        events = [event for record in records for event in record]
        # Sent again whole when only some went: the spool commits whole records (the collector
        # counts a progress event it has as a duplicate).
        if not events or self._send(events)[0] is Sent.OK:
            self._spool.commit(position)
        elif not self._stopping():
            self._pause()

    def _spill(self, wait: float = 0.0) -> None:
        """Move what waits in memory behind the spooled events (order kept, memory freed);
        with ``wait``, first wait that long for something to arrive."""
        pending: list[Wire] = []
        while True:
            try:
                item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            wait = 0.0
            self._queue.done()
            if item is _STOP:
                self._stop_seen = True
                continue
            pending.append(item)
        for start in range(0, len(pending), self._batch_size):
            self._to_spool(pending[start:start + self._batch_size])

    def _to_spool(self, batch: list[Wire]) -> None:
        assert self._spool is not None
        try:
            self._spool.append(batch)
        except SpoolUnavailable as exc:  # full, or the disk refused it: nothing of it was kept
            self._counters.count_dropped("push_spool", len(batch))
            log.warning("sparkwatch: dropping %d events: %s", len(batch), exc)

    def _finish(self) -> None:
        """At stop: try the spool until the deadline; what is left stays in it for next time."""
        while self._spool is not None and not self._spool.is_empty() and not self._stopping():
            self._spill()
            self._send_spooled()
        if self._spool is not None:
            self._spill()

    def _pause(self) -> None:
        """Wait before the next attempt (the backoff's wait or the server's Retry-After); wakes
        early at stop. With a spool, events arriving meanwhile go straight to it, so memory never
        fills during an outage."""
        self._wake.clear()
        end = time.monotonic() + self._next_wait
        if self._deadline is not None:
            end = min(end, self._deadline)
        while (remaining := end - time.monotonic()) > 0 and not self._wake.is_set():
            if self._spool is not None and not self._stop_seen:
                self._spill(wait=min(remaining, 0.1))
            else:
                self._wake.wait(min(remaining, 0.1))
            self.worker.beat()

    # --- one POST ---------------------------------------------------------------------------

    def _send(self, events: list[Wire]) -> tuple[Sent, int]:
        """POST ``events``, in as many requests as the body limit in front of the collector
        takes (:class:`BodySizes`): OK when the collector took responsibility for them all
        (accepted, or refused for good), RETRY when some should be sent again; with how many,
        from the first, it took (sent again, those were counted twice). The stop's deadline
        passed between two requests leaves the rest unsent, as a RETRY."""
        encoded = [json.dumps(e, separators=(",", ":")).encode() for e in events]
        start = 0
        while start < len(events):
            if start and self._stopping():
                return Sent.RETRY, start
            n = self._sizes.fitting(encoded[start:])
            sent = self._send_part(events[start:start + n], encoded[start:start + n])
            if sent is Sent.RETRY:
                return sent, start
            if sent is Sent.OK:
                start += n
        return Sent.OK, start

    def _send_part(self, events: list[Wire], encoded: list[bytes]) -> Sent:
        """POST ``events`` once; SMALLER when they are too many for the body limit. Only the
        collector's own answer counts as taken or refused (:func:`is_ingest_result`,
        :func:`is_collector_error`): a proxy's page or another service at the URL is a failed
        attempt."""
        raw = _BATCH_START + b",".join(encoded) + _BATCH_END
        body = gzip.compress(raw, 5)
        size = BodySize(len(body), len(raw))
        if len(events) == 1 and (refused := self._sizes.over(size)) is not None:
            self._refused(1, f"HTTP 413 for {refused} already; this one alone is {size}: not "
                             "sent")
            return Sent.OK
        status, reply, retry_header = self._post(body)
        if status in COME_BACK and retry_header is not None:
            self._failed(status, reply.said())
            retry_after = retry_after_seconds(retry_header)
            if retry_after is not None:  # unreadable: the backoff's wait, as for any failure
                # At least the backoff's first wait: "Retry-After: 0" answered at once, again
                # and again, made a loop of hundreds of POSTs (and log lines) a second.
                self._next_wait = min(max(retry_after, self._backoff.first),
                                      self._backoff.ceiling)
            return Sent.RETRY
        if status is not None and 200 <= status < 300:
            if not is_ingest_result(reply.body):
                # A proxy's page, a catch-all service: taken for delivered, the events were
                # lost without a word. Kept and sent again, as in an outage, and said.
                return self._not_a_collector(status, reply)
            assert reply.body is not None
            self._sizes.took(size)
            self._delivered(events, reply.body)
            return Sent.OK
        if status == 413:
            return self._too_large(len(events), size, reply)
        return self._refused_or_failed(status, len(events), reply)

    def _too_large(self, n: int, size: BodySize, reply: Reply) -> Sent:
        """413 whoever answers it: a body limit is real whether the collector's or a proxy's in
        front of it (their bodies differ: nginx answers an HTML page), and a smaller request is
        what either takes. One event alone is refused: over the limit, it can never be sent."""
        self._sizes.too_large(size, alone=n == 1)
        if n > 1:
            return Sent.SMALLER
        self._refused(n, f"HTTP 413 to {size} alone: {reply.said()}")
        return Sent.OK

    def _refused_or_failed(self, status: int | None, n: int, reply: Reply) -> Sent:
        if status == 429:
            # Without Retry-After: the collector's cardinality limit, which accepts nothing of
            # the request (its reply, an error naming the limit with every event listed as
            # refused). Counted as refused, whatever the reply's counts say (a 429 from
            # anything else was counted as delivered); a 429 not of that shape (a proxy's rate
            # limit page) is not the collector's refusal: sent again later.
            if not (is_ingest_result(reply.body) and is_collector_error(reply.body)):
                return self._not_a_collector(status, reply)
            self._refused(n, f"HTTP 429: {reply.said()}")
            return Sent.OK
        if status in PERMANENT and is_collector_error(reply.body):
            self._refused(n, f"HTTP {status}: {reply.said()}")
            return Sent.OK
        if status in PERMANENT:
            # Not the collector's words: nginx's "400 The plain HTTP request was sent to HTTPS
            # port", a gateway's page. Taken for a refusal, every event was dropped for good
            # for what a setting (the URL's scheme, a proxy) got wrong.
            return self._not_a_collector(status, reply)
        self._failed(status, reply.said())
        return Sent.RETRY

    def _not_a_collector(self, status: int, reply: Reply) -> Sent:
        said = reply.said()
        self._failed(status, NOT_A_COLLECTOR + (f"; it said {said!r}" if said else ""))
        return Sent.RETRY

    def _post(self, body: bytes) -> tuple[int | None, Reply, str | None]:
        """One POST of ``body`` (gzip JSON): the status (None: no answer), the reply, the
        Retry-After header."""
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip",
                   "User-Agent": f"sparkwatch-listener/{__version__}"}
        if self._endpoint.token:
            headers["Authorization"] = f"Bearer {self._endpoint.token}"
        request = urllib.request.Request(self._url, body, headers, method="POST")
        try:
            # read_http_answer raises HTTPError for every status outside 2xx.
            status, raw = read_http_answer(request, self._endpoint.timeout, REPLY_LIMIT)
            return status, _reply(raw), None
        except urllib.error.HTTPError as exc:
            return exc.code, _reply(exc.read()), exc.headers.get("Retry-After")
        except (OSError, ValueError, http.client.HTTPException) as exc:
            # refused, reset, timed out, DNS, a bad URL, too long an answer, not HTTP at all
            return None, Reply(None, request_failure(exc)), None

    def _delivered(self, events: list[Wire], reply: dict[str, Any]) -> None:
        rejected = reply["rejected"]  # a list: is_ingest_result
        refused = {r.get("index") for r in rejected if isinstance(r, dict)}
        # Plans travel with the events but are not events: "delivered" counts what was received.
        self._counters.count_delivered(self.QUEUE, sum(
            1 for i, e in enumerate(events) if not is_plan_item(e) and i not in refused))
        if rejected:
            first = rejected[0]
            self._refused(len(rejected), _shown(first.get("error", "")) if isinstance(first, dict)
                          else "")
        if failures := self._backoff.succeeded():
            log.info("sparkwatch: collector reachable again after %d failed attempts", failures)

    def _refused(self, n: int, why: str) -> None:
        self._counters.count_dropped("push_refused", n)
        now = time.monotonic()
        if (self._refused_said_at is not None
                and now - self._refused_said_at < REFUSED_LOG_SECONDS):
            self._refused_unsaid += n  # counted; said with the next line
            return
        more = (f"; {self._refused_unsaid} more refused since the last such line"
                if self._refused_unsaid else "")
        self._refused_said_at, self._refused_unsaid = now, 0
        log.warning("sparkwatch: the collector refused %d events (%s)%s", n, why, more)

    def _failed(self, status: int | None, why: str) -> None:
        self._next_wait = self._backoff.failed()
        self._counters.count_delivery_failure(self.QUEUE)
        now = time.monotonic()
        if self._backoff.failures == 1 or (
                self._backoff.loud and now - self._failure_said_at >= FAILURE_REMINDER_SECONDS):
            self._failure_said_at = now
            # The URL has no secret (the token travels in a header); ``why`` is the server's.
            log.warning("sparkwatch: push to %s failed (%s: %s), attempt %d, retrying",
                        safe_url(self._url), _status(status), why, self._backoff.failures)


def safe_url(url: str) -> str:
    """The URL fit for logs (see :func:`sparkwatch.redact.redact_url`)."""
    return redact_url(url)


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now; None when absent or
    unreadable (then the sink backs off as for any failure)."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "\xb2" (a superscript two) is a digit to isdigit
        return float(value)
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError, IndexError):
        # Whatever a server sends must not end the sender thread (a ValueError here did).
        return None


def _without_userinfo(url: str) -> str:
    """``url`` without a ``user:password@``: the collector authenticates by ``push.token`` only,
    and urllib takes the userinfo for part of the host name, asking DNS for
    ``user:password@host`` (the password sent to the resolver) and never reaching the collector.
    Said once, the password masked."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url  # refused where it is opened, its words never the URL's
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    log.warning("sparkwatch: the push URL %s names a user or password, which is not sent: the "
                "collector takes a token (push.token)", safe_url(url))
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def _shown(text: Any) -> str:
    """A server's words fit for one log line: control characters as spaces, at most
    :data:`DETAIL_CHARS` characters."""
    if not isinstance(text, str):
        return f"(a JSON {type(text).__name__})"
    flat = " ".join("".join(c if c.isprintable() else " " for c in text[:DETAIL_CHARS * 4]).split())
    return flat if len(flat) <= DETAIL_CHARS else flat[:DETAIL_CHARS - 1] + "…"


NOT_A_COLLECTOR = ("not an answer of a sparkwatch collector (is the push URL a collector's "
                   "/api/v1/events?)")


def _status(status: int | None) -> str:
    """A status as said in a log line: a foreign 203 or 204 by its own code (it was "HTTP 200",
    then "HTTP 2xx", for any)."""
    return "no answer" if status is None else f"HTTP {status}"


def _reply(raw: bytes) -> Reply:
    text = raw[:DETAIL_CHARS * 4].decode(errors="replace")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # "[" * 100000 is 100 KB, and ended the sender thread
        return Reply(None, text)
    return Reply(value if isinstance(value, dict) else None, text)
