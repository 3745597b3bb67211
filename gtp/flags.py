"""Command-line options made from the configuration's fields (engine/config.py): every entry point offers the same
option for the same field (``--batch-size`` is ``SearchConfig.batch_size`` wherever it appears), checked as the
dataclass checks the field, so that a value out of range is argparse's one-line error naming the option.

Layer: entry points. ``tabula gtp``, ``tabula analysis`` and the commands under tools/ import it; the engine never
does (it receives built configurations).
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping

from tabula.engine.config import ConfigError


def _flag(name: str, prefix: str) -> str:
    return "--" + (prefix + name).replace("_", "-")


@dataclass(frozen=True)
class Flag:
    """How ``add_flags`` offers a field where the generated option is not all it needs: its help, and another
    spelling (``--time`` for ``TimeConfig.max_time_per_move_s``), argparse's ``choices`` and ``metavar``, or the
    type of a field whose default (None) does not tell it."""

    help: str = ""
    name: str = ""  # the option, "--time" ("": --field-name, after the prefix)
    choices: tuple = ()
    metavar: str | None = None
    kind: Callable[[str], Any] | None = None


def add_flags(parser: argparse.ArgumentParser, defaults: object, help: Mapping[str, str | Flag] | None = None,
              prefix: str = "", skip: Iterable[str] = (), keep_unset: bool = False) -> None:
    """One ``--field-name`` option per field of the dataclass ``defaults`` (an instance, or a class for its own
    defaults), typed by the field's default: the flag of a field has its name in every command. ``help``: the
    fields to offer and their help, a ``Flag`` where the option needs more (None: every field); ``prefix`` tells
    apart fields of two configurations that share a name (``--net-threads`` is ``NetConfig.threads``); a bool is
    ``--name``/``--no-name``; a tuple takes comma-separated values of its elements' type (``--sizes 9,13``).
    A value is checked as the dataclass checks its field (``__post_init__``): out of range, it is an argparse
    error of its option. ``keep_unset``: the default is None, for commands that keep a saved configuration's value
    where no option is given (``from_flags`` with that configuration as its base)."""
    skipped = set(skip)
    instance = defaults() if isinstance(defaults, type) else defaults
    for f in dataclasses.fields(defaults):
        if f.name in skipped or (help is not None and f.name not in help):
            continue
        value = getattr(instance, f.name)
        shown = ",".join(str(v) for v in value) if isinstance(value, tuple) else value
        given = (help or {}).get(f.name)
        spec = given if isinstance(given, Flag) else Flag(given or "")
        text = spec.help or f"default {shown}"
        default = None if keep_unset else value
        option, dest = spec.name or _flag(f.name, prefix), (prefix + f.name).replace("-", "_")
        extra: dict[str, Any] = {"choices": spec.choices} if spec.choices else {}
        if spec.metavar or (spec.name and not spec.choices):  # a spelling of its own: argparse would show the dest
            extra["metavar"] = spec.metavar or spec.name.lstrip("-").replace("-", "_").upper()
        if isinstance(value, bool):
            parser.add_argument(option, action=argparse.BooleanOptionalAction, default=default, help=text,
                                dest=dest)
        else:
            kind = spec.kind or (_comma_separated(type(value[0]) if value else str) if isinstance(value, tuple)
                                 else type(value))
            parser.add_argument(option, type=_checked(instance, f.name, kind), default=default, help=text, dest=dest,
                                **extra)


def _checked(instance: object, name: str, kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """argparse's ``type`` for the option of field ``name``: ``kind`` converts the word, then the dataclass checks
    the value (``instance`` with it replaced), and a ConfigError becomes argparse's error for the option."""
    def parse(text: str) -> Any:
        value = kind(text)
        try:
            replace(instance, **{name: value})
        except ConfigError as error:
            raise argparse.ArgumentTypeError(error.reason if error.field == name else str(error)) from None
        return value
    parse.__name__ = getattr(kind, "__name__", "value")  # argparse names the type in "invalid int value: 'x'"
    return parse


def _comma_separated(item: type):
    """argparse's ``type`` for a tuple option: "9,13" -> (9, 13)."""
    def parse(text: str) -> tuple:
        return tuple(item(part) for part in text.split(",") if part.strip())
    parse.__name__ = f"comma-separated {item.__name__}"  # argparse names the type in its error message
    return parse


def from_flags(base: object, args: argparse.Namespace, prefix: str = ""):
    """``base`` (a dataclass instance, or a class for its defaults) with the values of the options ``add_flags``
    added for it; options left unset (None) keep the base's value."""
    base = base() if isinstance(base, type) else base
    given = {}
    for f in dataclasses.fields(base):
        value = getattr(args, (prefix + f.name).replace("-", "_"), None)
        if value is not None:
            given[f.name] = value
    return dataclasses.replace(base, **given)


__all__ = ["Flag", "add_flags", "from_flags"]
