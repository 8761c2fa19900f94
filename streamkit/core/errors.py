"""The exception family of streamkit.

``ConfigError`` is raised at build time (before any audio flows); ``SourceError`` says whether a
retry makes sense; ``BlockError`` wraps an exception raised inside a block's work call together
with the span of items it was working on.
"""

from __future__ import annotations

from typing import Any


class StreamkitError(Exception):
    """Base class of every error streamkit raises on purpose."""


class ConfigError(StreamkitError):
    """A graph, block parameter or format negotiation is wrong. Raised before audio flows."""


class SourceError(StreamkitError):
    """A source failed. ``retryable`` tells the adapter whether reconnecting can help.

    Args:
        message: what went wrong, for people.
        retryable: True when a later attempt may succeed (busy server, dropped connection).
        retry_after: a server-suggested delay in seconds, if any.
    """

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class ModelError(StreamkitError):
    """A model or weight file is missing, corrupt or does not match the block's configuration."""


class BlockError(StreamkitError):
    """An exception raised by a block's ``work``, with where it happened.

    Attributes:
        block: name of the block.
        span: ``(start, stop)`` input item indices of the failing call.
        cause: the original exception (also chained as ``__cause__``).
    """

    def __init__(self, block: str, span: tuple[int, int], cause: BaseException) -> None:
        super().__init__(f"block {block!r} failed on items [{span[0]}, {span[1]}): {type(cause).__name__}: {cause}")
        self.block = block
        self.span = span
        self.cause = cause


class GraphFatal(StreamkitError):
    """The graph stopped: too many consecutive block errors, or a fatal source condition."""

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.detail = detail
