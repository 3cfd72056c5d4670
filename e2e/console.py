"""The console: what every command prints, how errors and signals end a command.

One ``guard`` for every command: an e2e error prints one clear message and exits with its
code (1; 2 for bad input), Ctrl-C and SIGTERM stop the server (the session's ``finally``) and
exit 130 keeping what finished. Commands that must never read "1" for an unexpected failure
(the nightly: 1 means "regression") pass ``error_exit`` and ``unexpected_exit``. A config
file or flags that do not validate are a ConfigError (``validated``) whose message
``describe_validation_error`` writes: one line per key, with the keys allowed where one is
unknown.
"""

from __future__ import annotations

import re
import signal
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape

from e2e.errors import ConfigError, E2EError
from e2e.names import did_you_mean
from e2e.redact import scrub

__all__ = ["Say", "out", "err", "say", "guard", "print_run", "visible", "describe_validation_error",
           "validated", "EXIT_INTERRUPTED"]

EXIT_INTERRUPTED = 130
out = Console()
err = Console(stderr=True)
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Say = Callable[[str], None]  # where a command's progress lines go (``say`` on the terminal)


# every control character but newline and tab (C0, DEL, C1: an ESC starts a terminal escape
# sequence that can recolour, retitle, hide or rewrite what a user sees), and the
# bidirectional overrides that reorder a line's characters on screen
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: object) -> str:
    """``text`` safe to print on a terminal: each control character shown as its escape
    (``\\x1b``, ``\\u202e``) instead of acting on the terminal. Text from stored or imported
    files (a host name in the nightly store, a tool's error string) passes through this
    before e2e prints it."""
    line = str(text)
    if not _CONTROL.search(line):
        return line
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), line)


def say(message: str) -> None:
    """A progress line on stderr (dim), never parsed as markup, its control characters
    shown, not acted on."""
    err.print(f"[dim]{escape(visible(scrub(message)))}[/]", highlight=False, soft_wrap=True)


def _raise_on_sigterm(signum, frame):  # pragma: no cover - exercised by fault tests
    raise KeyboardInterrupt


def guard(fn: Callable[[], T], *, error_exit: int | None = None,
          unexpected_exit: int | None = None,
          interrupted: str = "the server was stopped; finished results are kept") -> T:
    """Run a command's body: SIGTERM behaves as Ctrl-C; an ``E2EError`` prints ``error:`` and
    exits with its code (or ``error_exit``); Ctrl-C exits 130; any other exception exits
    ``unexpected_exit`` after printing its traceback, or propagates when that is None."""
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    # Ctrl-C even when started where SIGINT was ignored (a background job of a script)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return fn()
    except E2EError as exc:
        err.print(f"[bold red]error:[/] {escape(visible(scrub(str(exc))))}", highlight=False,
                  soft_wrap=True)
        raise SystemExit(error_exit if error_exit is not None else exc.exit_code) from None
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: {interrupted}", highlight=False)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        if isinstance(exc, OSError) and exc.filename is not None:
            # a folder e2e needs (E2E_HOME, --results) it cannot use: bad input, no traceback
            err.print(f"[bold red]error:[/] {escape(visible(scrub(_os_error(exc))))}", highlight=False,
                      soft_wrap=True)
            raise SystemExit(error_exit if error_exit is not None else 2) from None
        if unexpected_exit is None:
            raise
        err.print_exception()
        err.print(f"[bold red]error:[/] failed unexpectedly (above); exit {unexpected_exit}")
        raise SystemExit(unexpected_exit) from None


def _os_error(exc: OSError) -> str:
    """An OSError on a path, as a sentence that says which path and what to do."""
    from e2e.paths import e2e_home

    path = str(exc.filename)
    where = ""
    try:
        home = str(e2e_home())
        if path == home or path.startswith(home.rstrip("/") + "/"):
            where = f" (under E2E_HOME, {home}: set E2E_HOME to a writable folder)"
    except Exception:  # noqa: BLE001 (the message must not fail)
        pass
    return f"cannot use {path}: {exc.strerror or exc}{where}"


def _fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}{unit}"


def print_run(folder: Path, record: Any, brief: bool = False, console: Console = out) -> None:
    """A unit's outcome: one line (``brief``) or the run's metrics table; GSM8K arms print
    their accuracy."""
    status = "[green]valid[/]" if record.valid else "[bold red]INVALID[/]"
    name = getattr(record, "run_id", None) or getattr(record, "label", "?")
    mx = getattr(record, "metrics", None)
    headline = ""
    if hasattr(record, "accuracy_strict") and record.valid:
        headline = f"  strict-match {record.accuracy_strict:.4f} on {record.n} docs"
        if record.acceptance_length is not None:
            headline += f", acceptance length {record.acceptance_length:.3f}"
    elif brief and mx is not None:
        headline = (f"  ms/verify step {_fmt(mx.ms_per_verify_step, '', 3)}  acceptance "
                    f"{_fmt(mx.acceptance_length, '', 3)}" if record.spec.dspark else
                    f"  TPOT mean {_fmt(mx.tpot_ms_mean, '', 3)} ms  median "
                    f"{_fmt(mx.tpot_ms_median, '', 3)} ms")
    console.print(f"{escape(visible(name))}: {status}{headline}  ->  "
                  f"{escape(visible(folder))}", highlight=False)
    for reason in record.invalid_reasons:
        console.print(f"  [red]invalid:[/] {escape(visible(scrub(reason)))}", highlight=False)
    for warning in record.warnings:
        console.print(f"  [yellow]warning:[/] {escape(visible(scrub(warning)))}", highlight=False)
    if mx is None or brief:
        return
    rows = [
        ("requests ok", f"{mx.ok_requests} / {mx.requests}"),
        ("TTFT mean / median / p99", f"{_fmt(mx.ttft_ms_mean)} / {_fmt(mx.ttft_ms_median)} / {_fmt(mx.ttft_ms_p99)} ms"),
        ("TPOT mean / median / p99", f"{_fmt(mx.tpot_ms_mean, '', 3)} / {_fmt(mx.tpot_ms_median, '', 3)} / {_fmt(mx.tpot_ms_p99, '', 3)} ms"),
        ("server TPOT mean", f"{_fmt(mx.server_tpot_ms_mean, ' ms', 3)}"),
        ("inter-chunk mean / p99", f"{_fmt(mx.itl_ms_mean, '', 3)} / {_fmt(mx.itl_ms_p99, '', 3)} ms"),
        ("E2E latency mean / p99", f"{_fmt(mx.e2el_ms_mean)} / {_fmt(mx.e2el_ms_p99)} ms"),
        ("output throughput", f"{_fmt(mx.output_throughput_tok_s, ' tok/s', 1)}"),
        ("request throughput", f"{_fmt(mx.request_throughput_req_s, ' req/s', 3)}"),
    ]
    if mx.goodput_slo:
        rows.append(("goodput", f"{_fmt(mx.goodput_share, '', 2)} of requests met {mx.goodput_slo}, "
                                f"{_fmt(mx.goodput_req_s, ' req/s', 3)}"))
    if record.spec.dspark:
        rows += [
            ("acceptance length", _fmt(mx.acceptance_length, "", 3)),
            ("acceptance rate", _fmt(mx.acceptance_rate, "", 3)),
            ("ms per verify step", f"{_fmt(mx.ms_per_verify_step, ' ms', 3)}  (= mean TPOT x acceptance length)"),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        console.print(f"  {key:<{width}}  {value}", highlight=False)


def _field_type(model: type[BaseModel], key: str) -> Any:
    field = model.model_fields.get(key)
    return field.annotation if field else None


def _unwrap(tp: Any) -> Any:
    """The model class inside Optional[...] / Annotated[...], or the type itself."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            inner = _unwrap(arg)
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return tp


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Walk ``loc`` (a pydantic error location) down from ``root`` to the model it names."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            current = _field_type(current, str(part))
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


MAX_ERRORS_SHOWN = 20


def describe_validation_error(exc: ValidationError, source: str, root: type[BaseModel]) -> str:
    """One line per error: the key's dotted path, what is wrong, and for an unknown key
    the keys allowed there."""
    lines = [f"{source}: invalid configuration"]
    errors = exc.errors()
    for error in errors[:MAX_ERRORS_SHOWN]:  # 200,000 unknown keys printed 27 MB
        loc = tuple(error["loc"])
        key = ".".join(str(p) for p in loc) or "(top level)"
        if error["type"] == "extra_forbidden":
            parent = _model_at(root, loc[:-1])
            allowed = ", ".join(parent.model_fields) if parent else "?"
            hint = did_you_mean(loc[-1], parent.model_fields) if parent else ""
            lines.append(f"  {key}: unknown key{hint}; allowed here: {allowed}")
        elif error["type"] == "missing":
            lines.append(f"  {key}: required key is missing")
        else:
            got = error.get("input")
            shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
            if len(shown) > 60:
                shown = shown[:57] + "..."
            lines.append(f"  {key}: {error['msg']} (got {shown})")
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"  ... and {len(errors) - MAX_ERRORS_SHOWN} more errors")
    return "\n".join(lines)


def validated(model: type[M], raw: Any, source: str) -> M:
    """``raw`` (a config file's tables, or flags merged over them) as ``model``; anything
    wrong is one ConfigError naming ``source`` and each bad key (``describe_validation_error``)."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source, model)) from None
    except (TypeError, ValueError, RecursionError) as exc:  # pragma: no cover - defensive
        raise ConfigError(f"{source}: invalid configuration: {exc}") from None
