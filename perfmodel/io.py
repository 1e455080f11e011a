"""Files in and out: atomic writes (temp file, check, rename) and bounded reads of regular files.

Every file perfmodel writes goes through :func:`atomic_write_bytes` / :func:`atomic_write_text`
(or :func:`atomic_output` for writers that need a path): the bytes go to a temporary file in
the target's folder, an optional ``check`` reads that file back (a profile is re-loaded), and
only then is it renamed over the target. A failure at any point (full disk, a check that
refuses the file, an interrupt) removes the temporary file and leaves an existing target as
it was. :func:`check_target` says before any work whether a target can be written at all.

Every input file is read with :func:`read_bounded`: regular files only (or stdin for ``-``
where a command documents it), at most ``limit`` bytes, with one clear error otherwise; a part
of a file another one points into (an ONNX model's external weights) with :func:`read_range`
(:func:`check_range` checks the file holds it without reading it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from .errors import DataError, PerfmodelError, UsageError

__all__ = [
    "CHART_SUFFIXES",
    "MAX_PROFILE_BYTES",
    "MAX_CSV_BYTES",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_output",
    "check_target",
    "read_bounded",
    "read_range",
    "check_range",
    "open_bounded_text",
]

#: The largest hardware profile read (a shipped one is ~5 KB; 1 MiB leaves room for comments).
MAX_PROFILE_BYTES = 1 << 20
#: The largest measurement CSV read (1 GiB: ~15M rows of the shipped format).
MAX_CSV_BYTES = 1 << 30

Check = Callable[[Path], None]


#: The files a chart can be drawn to, by extension (matplotlib's PNG, SVG and PDF writers).
CHART_SUFFIXES = (".png", ".svg", ".pdf")


def check_target(path: str | Path, suffixes: tuple[str, ...] = ()) -> Path:
    """``path`` if it can be written: a known suffix, an existing writable folder, not a folder.

    Raises :class:`UsageError` naming what is wrong; called before any work is done.
    """
    p = Path(path)
    if suffixes and p.suffix.lower() not in suffixes:
        raise UsageError(f"cannot write '{p}': unknown extension '{p.suffix}' (use {', '.join(suffixes)})")
    if "\n" in str(p) or "\r" in str(p):
        raise UsageError(f"cannot write {str(p)!r}: a file name with a line break")
    parent = p.parent if str(p.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"cannot write '{p}': '{parent}' is a file, not a folder")
    if not parent.is_dir():
        raise UsageError(f"cannot write '{p}': folder '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write '{p}': folder '{parent}' is not writable")
    if p.is_dir():
        raise UsageError(f"cannot write '{p}': it is a folder")
    if p.exists() and not p.is_file():
        raise UsageError(f"cannot write '{p}': not a regular file")
    try:  # a folder can pass the access check and still refuse new files (/proc, a read-only mount as root)
        fd, probe = tempfile.mkstemp(prefix=".perfmodel-probe.", dir=parent)
    except OSError as e:
        why = e.strerror or str(e)
        raise UsageError(f"cannot write '{p}': folder '{parent}' does not accept new files ({why})") from None
    os.close(fd)
    os.unlink(probe)
    return p


@contextlib.contextmanager
def atomic_output(path: str | Path, check: Check | None = None) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write to; on success it is checked and renamed.

    ``check(temp)`` may raise (a :class:`PerfmodelError`) to refuse the file. On any
    exception the temporary file is removed, the target is untouched, and the error goes on
    (an ``OSError`` as a :class:`DataError` naming the target).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise DataError(f"cannot write '{target}': {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if tmp.stat().st_size == 0:
            raise DataError(f"cannot write '{target}': nothing was written (0 bytes); the target is unchanged")
        if check is not None:
            check(tmp)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as e:
        raise DataError(f"cannot write '{target}': {e.strerror or e}; the target is unchanged") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes, check: Check | None = None) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_output`), flushed to disk."""
    with atomic_output(path, check) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: str | Path, text: str, check: Check | None = None) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically (see :func:`atomic_output`)."""
    atomic_write_bytes(path, text.encode("utf-8"), check)


def _check_regular(p: Path, limit: int, what: str, error: type[PerfmodelError]) -> None:
    """``p`` is a readable regular file of at most ``limit`` bytes, else ``error``."""
    try:
        st = p.stat()
    except OSError as e:
        raise error(f"{p}: cannot read {what} ({e.strerror or e})") from None
    if p.is_dir():
        raise error(f"{p}: cannot read {what}: is a folder")
    if not p.is_file():
        raise error(f"{p}: cannot read {what}: not a regular file (a device, pipe or socket)")
    if st.st_size > limit:
        raise error(f"{p}: cannot read {what}: {st.st_size:,} bytes, more than the {limit:,} allowed")


@contextlib.contextmanager
def open_bounded_text(path: str | Path, limit: int, what: str,
                      error: type[PerfmodelError] = DataError) -> Iterator[TextIO]:
    """The regular file ``path`` (at most ``limit`` bytes) opened as UTF-8 text for streaming.

    A byte-order mark is skipped; lines keep their endings (``newline=''``, as :mod:`csv`
    wants). Decoding errors surface while reading, as ``UnicodeDecodeError``.
    """
    p = Path(path)
    _check_regular(p, limit, what, error)
    try:
        f = open(p, encoding="utf-8-sig", newline="")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise error(f"{p}: cannot read {what} ({e.strerror or e})") from None
    with f:
        yield f


def read_bounded(path: str | Path, limit: int, what: str,
                 error: type[PerfmodelError] = DataError, stdin: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (``-`` is stdin when ``stdin``), at most ``limit``.

    A folder, a device (``/dev/zero``), a FIFO or a file over ``limit`` bytes raises
    ``error`` naming the file, what was expected (``what``) and the limit.
    """
    if stdin and str(path) == "-":
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise error(f"<stdin>: cannot read {what}: more than the {limit:,} bytes allowed")
        return data
    p = Path(path)
    _check_regular(p, limit, what, error)
    try:
        with open(p, "rb") as f:  # read(n) allocates n bytes first: the file's size, not the bound
            size = os.fstat(f.fileno()).st_size
            data = f.read(min(size, limit) + 1)
            if len(data) > size:  # it grew since: read on, up to the bound
                data += f.read(limit + 1 - len(data))
    except OSError as e:
        raise error(f"{p}: cannot read {what} ({e.strerror or e})") from None
    if len(data) > limit:
        raise error(f"{p}: cannot read {what}: more than the {limit:,} bytes allowed")
    return data


def check_range(path: str | Path, offset: int, length: int, what: str,
                error: type[PerfmodelError] = DataError) -> None:
    """The regular file ``path`` (of any size) holds the ``length`` bytes at ``offset``, else ``error``."""
    p = Path(path)
    _check_regular(p, sys.maxsize, what, error)
    size = p.stat().st_size
    if offset < 0 or length < 0 or offset + length > size:
        raise error(f"{p}: cannot read {what}: bytes {offset:,} to {offset + length:,}, the file has {size:,}")


def read_range(path: str | Path, offset: int, length: int, limit: int, what: str,
               error: type[PerfmodelError] = DataError) -> bytes:
    """The ``length`` bytes at ``offset`` of the regular file ``path`` (:func:`check_range`), at
    most ``limit`` of them: a part of a file another one points into, read without the rest."""
    p = Path(path)
    if length > limit:
        raise error(f"{p}: cannot read {what}: {length:,} bytes, more than the {limit:,} allowed")
    check_range(p, offset, length, what, error)
    try:
        with open(p, "rb") as f:
            f.seek(offset)
            data = f.read(length)
    except OSError as e:
        raise error(f"{p}: cannot read {what} ({e.strerror or e})") from None
    if len(data) != length:
        raise error(f"{p}: cannot read {what}: {len(data):,} of {length:,} bytes (the file shrank while read)")
    return data
