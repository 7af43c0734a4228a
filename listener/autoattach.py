"""Zero-code attach: every SparkSession the driver creates gets the listener, once.

Installed by the ``sitecustomize`` of :mod:`sparkwatch.bootstrap` (which ``sparkwatch run`` puts on
``PYTHONPATH``). Importing pyspark costs a second, and every Python process started under
``sparkwatch run`` reads this module (Spark's Python workers too): so nothing here imports pyspark.
An import hook wraps the session builders (classic ``pyspark.sql.session`` and Spark Connect's
``pyspark.sql.connect.session``) when the app imports them; the wrapped ``getOrCreate`` and
``create`` attach with the same ``SPARKWATCH_*`` settings as :func:`sparkwatch.attach`, and the
wrapped ``stop`` detaches first, so the stop line carries Spark's final counts.

SIGTERM: Python's default ends the process at once, skipping atexit, so the listener would neither
write what it holds nor end the runs it saw start. :func:`install` (the bootstrap, on the main
thread as Python starts) therefore puts a handler on SIGTERM when it is at its default action: it
keeps that action (the signal is sent again with the default back) until a session of this process
is attached, and from then raises SystemExit(143) in the main thread, so that the interpreter
unwinds and the attachment's atexit detach runs (for a session attached on another thread, whose
app Python would wait for once the main thread unwound, or once the main thread has ended, it
detaches there and then, and the signal ends the process). It has to be there from the start: only
the main thread may set a handler, and many apps build their session on another (a web app's
request thread, an orchestrator's worker). The cost: ``signal.getsignal(SIGTERM)`` shows this
handler instead of SIG_DFL to the app (a handler of the app's own replaces it as ever, and one that
calls it on is left to decide alone), and a SIGTERM waits for the main thread to run Python again,
as any Python handler does.

Standard library only at import time; a failure to attach is one line on stderr, never an error
raised into the app.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

SESSION_MODULES = ("pyspark.sql.session", "pyspark.sql.connect.session")
WRAPPED = "_sparkwatch_wrapped"
# Python processes Spark itself starts (executor workers, Connect's foreachBatch and listener
# runners) create sessions of their own at times: the driver's attachment covers them.
SPARK_WORKER_MAINS = ("pyspark.daemon", "pyspark.worker", "pyspark.sql.connect.")

_lock = threading.RLock()
_attaching = threading.local()
# Session -> its Attachment; weak so a session that is gone does not stay alive for us.
_attached: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
# What "not attached" has said: the same bad setting refuses every session of the app (one that
# stops and builds its session again, a test suite's hundred sessions), and is said once.
_refusals_said: set[str] = set()
# The process whose attachments SIGTERM exits through atexit for: not a child it forked (a
# multiprocessing worker inherits the handler and the table above, not the listener's threads).
_attached_in: int | None = None
# Whether the attachment was made on the main thread: SIGTERM unwinds that thread then. One
# made on another has its app in a thread Python would wait for after the main one unwound.
_attached_on_main = True


def install() -> None:
    """Wrap the session builders now if pyspark is loaded, else as soon as it is imported; put
    the SIGTERM handler in place (see the module's doc)."""
    _handle_sigterm()
    for name in SESSION_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
    if not any(isinstance(f, _SessionModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SessionModuleFinder())


def patch(module: ModuleType) -> None:
    """Wrap ``SparkSession.Builder.getOrCreate``/``create`` and ``SparkSession.stop`` of one
    session module (idempotent)."""
    session_cls = getattr(module, "SparkSession", None)
    builder_cls = getattr(session_cls, "Builder", None)
    if session_cls is None or builder_cls is None:
        return
    for name in ("getOrCreate", "create"):
        _wrap(builder_cls, name, _attaching_call)
    _wrap(session_cls, "stop", _detaching_call)


def attachment_of(session: Any) -> Any:
    """The Attachment made for ``session``, or None."""
    with _lock:
        return _attached.get(session)


def _wrap(cls: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = cls.__dict__.get(name)
    if original is None or getattr(original, WRAPPED, False):
        return
    wrapper = make(original)
    setattr(wrapper, WRAPPED, True)
    setattr(cls, name, wrapper)


def _attaching_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        session = original(self, *args, **kwargs)
        attach_once(session)
        return session

    return wrapper


def _detaching_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            detach(self)
        except Exception as exc:  # noqa: BLE001 - the app's stop() must still stop Spark
            _say(f"sparkwatch: detach failed: {exc}")
        return original(self, *args, **kwargs)

    return wrapper


def attach_once(session: Any) -> None:
    """Attach to ``session`` unless it already is (a classic builder with ``remote`` set goes
    through the Connect builder too), or this process is one Spark started."""
    if getattr(_attaching, "active", False) or _in_spark_worker():
        return
    with _lock:
        try:
            if session in _attached:
                return
        except TypeError:  # not weak-referenceable: nothing we know how to attach to
            return
        _attaching.active = True
        try:
            _attached[session] = _attach(session)
            _exit_through_atexit_on_sigterm()
        except Exception as exc:  # noqa: BLE001 - never break the app we watch
            _attached[session] = None
            _say_once(f"sparkwatch: not attached: {exc}")
        finally:
            _attaching.active = False


def _exit_through_atexit_on_sigterm() -> None:
    """From now on SIGTERM exits through atexit in this process (see the module's doc), where
    the handler is on SIGTERM: put there by :func:`install`, or now on the main thread (an app
    that set SIG_DFL back itself). An app with a handler of its own keeps it, and so does an app
    that attaches itself: only what attaches automatically comes here."""
    global _attached_in, _attached_on_main
    _attached_in = os.getpid()
    _attached_on_main = threading.current_thread() is threading.main_thread()
    _handle_sigterm()


def _handle_sigterm() -> None:
    """:func:`_on_sigterm` on SIGTERM if it is at its default action: ignored stays ignored, an
    app's handler stays, and off the main thread (where Python refuses) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: Any) -> None:
    """The default action until this process holds an attachment; then SystemExit(143) where
    the session was attached on the main thread, else a detach here and the default action."""
    if signal.getsignal(signum) is not _on_sigterm:
        # Called by the app's own handler, which replaced this one and passes the signal on: the
        # app ends as it means to, as it would with the default action it could not call.
        return
    signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    if _holds_attachment():
        if _attached_on_main and not _main_thread_ended():
            raise SystemExit(128 + signum)
        # The app runs in a thread of its own: unwound, the main thread would leave Python
        # waiting for it (a stream that never ends: the process hung until SIGKILL), and once
        # the main thread has ended an exception raised here is ignored (a traceback, the exit
        # status 0). So what is held is written now, then the signal ends the process as the
        # default would.
        _detach_all()
    os.kill(os.getpid(), signum)  # ended by the signal, as without us


def _holds_attachment() -> bool:
    """Whether this process holds a live attachment, which its atexit detach would end."""
    if _attached_in != os.getpid():
        return False
    with _lock:  # reentrant: the main thread may be inside attach_once as the signal comes
        return any(att is not None and att.live for att in _attached.values())


def _main_thread_ended() -> bool:
    """Whether the main thread ran the app to its end and Python is in threading's shutdown,
    waiting for the threads that are not daemons."""
    return bool(getattr(threading, "_SHUTTING_DOWN", False))


def _detach_all() -> None:
    with _lock:
        sessions = list(_attached.keys())
    for session in sessions:
        try:
            detach(session)
        except Exception as exc:  # noqa: BLE001 - the signal must still end the process
            _say(f"sparkwatch: detach failed: {exc}")


def detach(session: Any) -> None:
    with _lock:
        attachment = _attached.pop(session, None) if _is_key(session) else None
    if attachment is not None:
        attachment.detach()


def _say_once(line: str) -> None:
    """:func:`_say` the line unless this process said it already (kept as announced, escaped and
    cut: a 1 MB value is not kept whole for the comparison)."""
    try:
        from sparkwatch.listener.announce import announced  # lazily: stdlib-only at import

        line = announced(line)
    except Exception:  # noqa: BLE001, S110 - said as it is then
        pass
    if line not in _refusals_said:
        _refusals_said.add(line)
        _say(line)


def _say(line: str) -> None:
    """One line on stderr that can never raise into the app (stderr closed or broken)."""
    try:
        from sparkwatch.listener.announce import announce  # lazily: stdlib-only at import

        announce(line)
    except Exception:  # noqa: BLE001, S110 - nowhere left to say it
        pass


def _is_key(session: Any) -> bool:
    try:
        weakref.ref(session)
    except TypeError:
        return False
    return True


def _attach(session: Any) -> Any:
    from sparkwatch.listener.attach import RUN_ORIGIN, attach_from

    return attach_from(session, RUN_ORIGIN, {})


def _in_spark_worker() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", "") or ""
    return name.startswith(SPARK_WORKER_MAINS)


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then wraps the module's session classes."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        try:
            patch(module)
        except Exception as exc:  # noqa: BLE001 - pyspark must import whatever happens here
            _say(f"sparkwatch: cannot attach automatically: {exc}")

    def __getattr__(self, name: str) -> Any:  # get_filename, get_code, ... of the real loader
        return getattr(self._loader, name)


class _SessionModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the session modules with the other finders and hands them to the patching loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in SESSION_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None
