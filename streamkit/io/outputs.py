"""Output files: never replace what is not a regular file; write whole files atomically.

Every file streamkit writes for a user (CLI outputs, RTTM/TSV detections, corpus manifests and
clips, checkpoints, benchmark JSON, recordings, event logs) goes through this module:

* A path that already exists must be a **regular file**. Anything else (a directory, a character
  or block device such as ``/dev/null``, a FIFO, a socket) is refused with :class:`OutputPathError`
  (``<path>: is a FIFO, not a regular file; refusing to write output there ...``) and nothing is changed.
* A **symlink** as the last component is refused too, even one pointing to a regular file:
  replacing it would silently turn the link into a file, and writing through it would write
  somewhere the user did not name. To write to the link's target, name the target. Symlinked
  *directories* above the file are followed as usual (only the file's own name is checked).
* Whole files (:func:`write_text`, :func:`write_bytes`, :func:`atomic_output`) are written to a
  temporary file in the same directory (created with ``O_EXCL``, the umask applied, the mode of a
  replaced file kept), flushed and ``fsync``-ed, then moved over the path with :func:`os.replace`:
  a reader sees the old file or the new one, never half of it; if writing fails, the old file is
  left as it was and the temporary file removed.
* Streaming files (a recording, an event log) that grow while a graph runs cannot be written that
  way: :func:`open_stream_fd` / :func:`open_stream` open them with ``O_NOFOLLOW | O_NONBLOCK`` (so
  a FIFO without a reader cannot block) and check the *opened* file with ``fstat`` before
  truncating it, which leaves no window between the check and the open.

Missing parent directories are created.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from streamkit.core.errors import ConfigError

_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


class OutputPathError(ConfigError):
    """An output path names something that is not a regular file (nothing was written)."""


def _kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: str | os.PathLike[str], kind: str) -> OutputPathError:
    return OutputPathError(f"{os.fspath(path)}: is {kind}, not a regular file; refusing to write output there (nothing was changed)")


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if it is free or a regular file (not a symlink), else :class:`OutputPathError`.

    Writes nothing. Use it to fail early (before a long job) on an output path that would be
    refused at the end. An ``OSError`` from ``lstat`` (a parent that is a file, permissions)
    propagates.
    """
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    kind = _kind(st.st_mode)
    if kind is not None:
        raise _refuse(path, kind)
    return p


def _mkdirs(p: Path) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)  # an OSError (a file in the way, permissions) propagates


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8", newline: str | None = None,
                  durable: bool = True) -> Iterator[IO[Any]]:  # fmt: skip
    """Write a whole file atomically: ``with atomic_output(p, "wb") as f: torch.save(obj, f)``.

    Args:
        path: the file to create or replace (a regular file or nothing; see the module docstring).
        mode: ``"w"`` (text) or ``"wb"`` (binary).
        encoding, newline: for text mode.
        durable: ``fsync`` the file and its directory (off only for bulk outputs, such as the
            thousands of clips of a corpus, whose manifest is written last and durably).

    Raises:
        OutputPathError: ``path`` exists and is not a regular file (checked before writing and
            again just before the rename).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_output: mode must be 'w' or 'wb', got {mode!r}")
    p = check_output_path(path)
    _mkdirs(p)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = p.with_name(f".{p.name}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as for any new file
            break
        except FileExistsError:
            continue
    try:
        # the file object owns the descriptor from here on (closed with it, also on errors)
        f: IO[Any] = os.fdopen(fd, "wb") if mode == "wb" else os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with f:
            with contextlib.suppress(FileNotFoundError):
                old = os.lstat(p)
                if stat.S_ISREG(old.st_mode):
                    os.chmod(f.fileno(), stat.S_IMODE(old.st_mode))  # replacing a file keeps its permissions
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        check_output_path(p)  # something else may have appeared there meanwhile
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(p.parent)


def write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_output`); returns the path."""
    with atomic_output(path, "wb", durable=durable) as f:
        f.write(data)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", durable: bool = True) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_output`); returns the path."""
    with atomic_output(path, "w", encoding=encoding, durable=durable) as f:
        f.write(text)
    return Path(path)


def open_stream_fd(path: str | os.PathLike[str], *, append: bool = False, read: bool = False) -> int:
    """A file descriptor for a file written as it grows (a recording, an event log).

    The path must be free or a regular file (not a symlink). The file is opened without following
    a symlink and without blocking on a FIFO, checked with ``fstat``, and only then truncated
    (``append=False``) or positioned at its end (``append=True``). ``read`` opens it read-write
    (for writers that seek back, such as audio file headers).

    Raises:
        OutputPathError: the path is not a regular file (nothing was changed).
        OSError: it cannot be opened (permissions, a missing parent that cannot be created).
    """
    p = check_output_path(path)
    _mkdirs(p)
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | (os.O_APPEND if append else 0)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError as exc:
        # ELOOP: a symlink appeared after the check; ENXIO: a FIFO without a reader
        st = None
        with contextlib.suppress(OSError):
            st = os.lstat(p)
        kind = _kind(st.st_mode) if st is not None else None
        if kind is not None:
            raise _refuse(path, kind) from None
        raise exc
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _refuse(path, kind)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        if not append:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_stream(path: str | os.PathLike[str], *, append: bool = False, encoding: str = "utf-8", buffering: int = -1,
                newline: str | None = None) -> IO[str]:  # fmt: skip
    """A text file opened through :func:`open_stream_fd` (``append`` or truncate), for line-by-line writers."""
    fd = open_stream_fd(path, append=append)
    try:
        return os.fdopen(fd, "a" if append else "w", encoding=encoding, buffering=buffering, newline=newline)
    except BaseException:
        os.close(fd)
        raise


def write_audio(path: str | os.PathLike[str], data: Any, rate: int, *, subtype: str | None = None, durable: bool = True) -> Path:
    """Write an audio file with soundfile, atomically (see :func:`atomic_output`); the format comes
    from the suffix (``.wav``, ``.flac``, ``.ogg``); returns the path."""
    import soundfile as sf

    fmt = Path(path).suffix.lstrip(".").upper() or "WAV"
    with atomic_output(path, "wb", durable=durable) as f:
        sf.write(f, data, rate, subtype=subtype, format=fmt)
    return Path(path)


def open_soundfile(path: str | os.PathLike[str], **kw: Any) -> Any:
    """``soundfile.SoundFile(path, mode="w", **kw)`` for a recording, opened through :func:`open_stream_fd`
    (a symlink, FIFO, device ... is refused; an existing regular file is truncated). The SoundFile
    owns the descriptor (``close()`` closes it)."""
    import soundfile as sf

    fd = open_stream_fd(path, read=True)  # read-write: libsndfile seeks back to finish the header
    try:
        return sf.SoundFile(fd, mode="w", closefd=True, **kw)
    except sf.LibsndfileError:  # raised after sf_open_fd failed, which has closed the descriptor already
        raise
    except BaseException:  # soundfile refused the arguments before handing the descriptor over
        os.close(fd)
        raise
