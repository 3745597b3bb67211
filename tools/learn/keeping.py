"""Keeping a run where a new machine finds it: files copied atomically, and a kept run restored into an empty run
directory. Both ``tabula train --keep`` and ``tabula rl --keep`` restore through ``restore_kept``.

Layer: tools; no torch.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from typing import IO

# The process's umask, read once (reading it means setting it): the temporary files, which mkstemp makes private,
# get the permissions a plain open() would have given the file
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _write_atomic(target: str, write: Callable[[IO], None], mode: str = "wb") -> None:
    """``target`` written by ``write(handle)`` through a temporary file of its own in the same folder (unique, so
    that two writers, or a leftover temporary file, never meet; ending ``.tmp``, which ``restore_kept`` skips),
    then moved over ``target``: ``target`` is whole or old. The temporary file is removed where writing fails."""
    folder = os.path.dirname(target) or "."
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=os.path.basename(target) + ".", suffix=".tmp")
    try:
        with os.fdopen(descriptor, mode) as handle:
            write(handle)
        os.chmod(temporary, 0o666 & ~_UMASK)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise


def copy_atomic(source: str, target: str) -> None:
    """``source`` copied to ``target`` (its folders made), through a temporary file: ``target`` is whole or old."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)

    def copy(handle: IO) -> None:
        with open(source, "rb") as read:
            shutil.copyfileobj(read, handle)

    _write_atomic(target, copy)


def restore_kept(directory: str, keep: str, marker: str, names: Iterable[str] | None = None,
                 skip: Iterable[str] = ()) -> bool:
    """On a new machine (``directory`` has no ``marker`` file, the one that says a run is there) copy the run kept
    in ``keep`` into it: ``names`` (those that exist; None: every kept file but ``skip`` and temporary ones), then
    ``marker`` last, so that a kill part-way restores it again next time. False, and nothing copied, where ``keep``
    is "" or has no ``marker``, or ``directory`` already has one. Paths are relative to the run directory."""
    if not keep or not os.path.exists(os.path.join(keep, marker)) or os.path.exists(os.path.join(directory, marker)):
        return False
    if names is None:
        skipped = {marker, *skip}
        names = [os.path.relpath(os.path.join(root, name), keep) for root, _, files in os.walk(keep)
                 for name in files if not name.endswith(".tmp")]
        names = [name for name in names if name not in skipped]
    for name in names:
        if os.path.exists(os.path.join(keep, name)):
            copy_atomic(os.path.join(keep, name), os.path.join(directory, name))
    copy_atomic(os.path.join(keep, marker), os.path.join(directory, marker))
    return True


def settle_run_config(directory: str, config, fixed: Iterable[str], command: str, flag: str,
                      name: str = "config.json", extra: dict | None = None) -> None:
    """Write a run's ``name`` (``config.to_dict()``, and ``extra``'s entries) into ``directory``, or, where the run
    is there already, check that ``config`` keeps each of the ``fixed`` fields it was started with: SystemExit
    naming them otherwise (``command`` and ``flag``, the option that names the run directory, say what to do)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    if os.path.exists(path):
        with open(path) as handle:
            saved = json.load(handle)
        different = [k for k in fixed if k in saved and saved[k] != getattr(config, k)]
        if different:
            raise SystemExit(f"{command}: {directory} is a run with other {', '.join(different)} "
                             f"({', '.join(f'{k}={saved[k]!r}' for k in different)}); use another {flag}")
    written = {**config.to_dict(), **(extra or {})}
    _write_atomic(path, lambda handle: json.dump(written, handle, indent=2), "w")


__all__ = ["copy_atomic", "restore_kept", "settle_run_config"]
