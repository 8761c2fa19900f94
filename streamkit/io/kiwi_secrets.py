"""KiwiSDR channel passwords: where they come from, and keeping them out of logs.

* :func:`resolve_password` takes a password from exactly one of: the value itself, an environment
  variable (``password_env``) or a file (``password_file``), so that it need not sit in ``argv``
  (visible to every user in ``ps``) or in a graph file.
* :func:`redact` replaces the password fields of ``SET auth`` commands (``p=`` and ``ipl=``) in any
  text; :class:`RedactSecrets` is a :class:`logging.Filter` doing that to log records, and
  :func:`install_log_redaction` puts it on the loggers that see those commands: websockets' own
  (its debug log prints every frame sent and received, ``SET auth t=kiwi p=...`` included) and
  streamkit's KiwiSDR client and emulator loggers.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Final

from streamkit.core.errors import ConfigError

__all__ = [
    "PASSWORD_ENV",
    "REDACTED",
    "RedactSecrets",
    "add_password_arguments",
    "install_log_redaction",
    "password_from_args",
    "redact",
    "resolve_password",
]

PASSWORD_ENV: Final = "STREAMKIT_KIWI_PASSWORD"
"""Environment variable ``streamkit monitor`` reads the channel password from when no option gives one."""

REDACTED: Final = "<redacted>"

#: loggers that may carry a ``SET auth`` command (filters act on records of their own logger only)
LOGGERS: Final = (
    "websockets",
    "websockets.client",
    "websockets.server",
    "streamkit.kiwi",
    "streamkit.protocols.kiwi_client",
    "streamkit.protocols.kiwi_server",
    "streamkit.io.kiwi_emulator",
)

_AUTH_CMD: Final = re.compile(r"SET auth\b[^\n'\"]*")
_SECRET_FIELD: Final = re.compile(r"\b(p|ipl)=[^\s'\"]*")


def redact(text: str) -> str:
    """``text`` with the ``p=``/``ipl=`` values of every ``SET auth`` command replaced by ``<redacted>``."""
    if "auth" not in text:
        return text
    return _AUTH_CMD.sub(lambda m: _SECRET_FIELD.sub(rf"\1={REDACTED}", m.group(0)), text)


class RedactSecrets(logging.Filter):
    """Rewrites a record whose formatted message holds a ``SET auth`` password (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format is the logging module's business, not ours
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install_log_redaction(names: tuple[str, ...] = LOGGERS) -> None:
    """Put one :class:`RedactSecrets` on each named logger (idempotent)."""
    for name in names:
        lg = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in lg.filters):
            lg.addFilter(RedactSecrets())


def resolve_password(password: str | None = None, *, env: str | None = None, file: str | os.PathLike[str] | None = None) -> str:
    """The password from at most one source; "" when none is given.

    Args:
        password: The password itself.
        env: Name of an environment variable holding it.
        file: A file holding it (one trailing newline is removed).

    Raises:
        ConfigError: more than one source, an unset variable, an unreadable file. The messages
            name the variable or file, never the password.
    """
    given = [name for name, v in (("password", password), ("password_env", env), ("password_file", file)) if v not in (None, "")]
    if len(given) > 1:
        raise ConfigError(f"give the password one way only (got {', '.join(given)})")
    if env:
        value = os.environ.get(env)
        if value is None:
            raise ConfigError(f"environment variable {env} (the KiwiSDR password) is not set")
        return value
    if file:
        path = Path(file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ConfigError(f"cannot read the password file {path}: {reason}") from None
        return text.removesuffix("\n").removesuffix("\r")
    return password or ""


def add_password_arguments(parser: Any, *, help_what: str = "KiwiSDR channel password", default_env: str | None = None) -> None:
    """``--password`` / ``--password-env VAR`` / ``--password-file PATH`` (one of them) on an argparse parser."""
    g = parser.add_mutually_exclusive_group()
    tail = f"; default: ${default_env} if set" if default_env else ""
    g.add_argument("--password", default=None, help=f"{help_what} (visible to other users in `ps`: prefer --password-env or --password-file{tail})")
    g.add_argument("--password-env", default=None, metavar="VAR", help=f"read the {help_what} from environment variable VAR")
    g.add_argument("--password-file", default=None, metavar="PATH", help=f"read the {help_what} from a file (one trailing newline is ignored)")


def password_from_args(ns: Any, *, default_env: str | None = None) -> str:
    """The password the options of :func:`add_password_arguments` give ("" for none).

    With none of the three, ``default_env`` (e.g. :data:`PASSWORD_ENV`) is read if set.

    Raises:
        ConfigError: an unset variable or an unreadable file.
    """
    if ns.password is None and not ns.password_env and not ns.password_file and default_env:
        return os.environ.get(default_env, "")
    return resolve_password(ns.password, env=ns.password_env, file=ns.password_file)
