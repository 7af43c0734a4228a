"""The signal convention in process, with real signals sent to this process: the first SIGINT or
SIGTERM raises where the command is and decides the exit status (128 + N); a later one only says
the stop is under way; handlers come back on a normal way out; off the main thread nothing is
installed (Python allows handlers on the main thread only)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from sparkwatch.cli import main as cli_main
from sparkwatch.cli.signals import (
    STILL_STOPPING,
    Stopped,
    status_of,
    stop_with_exit_status,
)
from sparkwatch.interrupts import interrupt_within


def test_the_first_sigterm_stops_and_a_second_is_only_noted(capfd: pytest.CaptureFixture[str],
                                                            ) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(Stopped) as stopped, stop_with_exit_status() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
        assert stopped.value.signum == signal.SIGTERM and status_of(stopped.value) == 143
        os.kill(os.getpid(), signal.SIGINT)  # while stopping: the handler stays, says so
        assert capfd.readouterr().err == STILL_STOPPING.decode()
        assert stop.status(0) == 143  # a server that took the signal as its clean stop
        assert stop.status(1) == 1  # a command's own failure keeps its status
    finally:  # a stopped process is on its way out and keeps them; this one goes on testing
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_handlers_come_back_on_a_normal_way_out() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with stop_with_exit_status() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop.handler
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert stop.status(0) == 0


def test_a_signal_the_process_was_started_ignoring_stays_ignored() -> None:
    """A script's background job (``cmd &``) starts with SIGINT ignored: Ctrl-C at the terminal
    is for the script, not for the job."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_with_exit_status() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == stop.handler
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_sigterm_the_process_was_started_ignoring_is_handled_all_the_same() -> None:
    """SIGTERM is how a command stops what it started (its collector, a JVM starting): left
    ignored, they would inherit it ignored and outlive the command."""
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with stop_with_exit_status() as stop:
            assert signal.getsignal(signal.SIGTERM) == stop.handler
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_plain_keyboard_interrupt_is_ctrl_c() -> None:
    assert status_of(KeyboardInterrupt()) == 130


def test_off_the_main_thread_no_handler_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def command() -> None:
        with stop_with_exit_status() as stop:
            seen.append(signal.getsignal(signal.SIGTERM))
            seen.append(stop.status(0))

    thread = threading.Thread(target=command)
    thread.start()
    thread.join()
    assert seen == [before, 0]


class _SignalledWhileNamed:
    """A descriptor that is sent SIGTERM while Python names it: what a dataclass field is when
    the signal arrives while a command's modules import."""

    def __set_name__(self, owner: type, name: str) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def _command_whose_import_is_signalled(argv: object, stopping: object) -> int:
    type("Settings", (), {"tokens": _SignalledWhileNamed()})
    return 0


def test_a_sigterm_that_python_wraps_in_another_exception_still_exits_143(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first CI run on two workers stopped ``top`` while its settings dataclass was made:
    Python 3.11 reported the stop as ``RuntimeError: Error calling __set_name__``, a traceback
    and exit 1 instead of 143."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(cli_main, "_main", _command_whose_import_is_signalled)
    try:
        assert cli_main.main([]) == 143
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


class _SignalledWhileCollected:
    """An object that is sent SIGINT while Python runs its ``__del__``: an exception raised
    there is only reported ("Exception ignored in ..."), so the stop was lost, and each later
    Ctrl-C only said the stop was under way (seen as a ``top`` that went on drawing in CI)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs in here, inside __del__
            pass


def _command_signalled_in_a_finalizer(argv: object, stopping: object) -> int:
    _SignalledWhileCollected()  # collected at once
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # a long-running command: stopped, or done at 30 s
        time.sleep(0.01)
    return 0


def test_a_signal_swallowed_by_a_finalizer_is_given_back_and_stops_the_command(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    hook = sys.unraisablehook
    monkeypatch.setattr(cli_main, "_main", _command_signalled_in_a_finalizer)
    started = time.monotonic()
    try:
        assert cli_main.main([]) == 130
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook
    assert time.monotonic() - started < 30
    assert "Exception ignored" not in capfd.readouterr().err


def test_the_unraisable_hook_comes_back_and_passes_other_exceptions_on() -> None:
    hook = sys.unraisablehook
    seen: list[BaseException | None] = []
    with stop_with_exit_status() as stop:
        ours = sys.unraisablehook
        assert ours is not hook
        passing = stop.unraisable_hook(lambda u: seen.append(u.exc_value))
        error = ValueError("in a finalizer")
        passing(SimpleNamespace(exc_value=error))  # type: ignore[arg-type]
    assert seen == [error] and sys.unraisablehook is hook


def test_an_exception_without_an_interrupt_behind_it_is_not_taken_for_one() -> None:
    try:
        try:
            raise ValueError("bad input")
        except ValueError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert interrupt_within(wrapped) is None
    stopped = Stopped(signal.SIGTERM)
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = stopped
    assert interrupt_within(wrapped) is stopped
