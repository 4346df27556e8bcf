"""Log lines of bounded length, whatever a client sends (issue 38).

Group ids, transactional ids, member ids, client ids and user names are the client's choice and
can be megabytes long; a log line that quotes one at a time lets anyone who can connect fill the
disk. `BoundedArgs` cuts every string argument of a record to ARG_LIMIT characters and a
preformatted message to MESSAGE_LIMIT, saying how long the original was. It is installed on the
broker's handlers (`install`), so every module's log line is bounded without each call site
remembering to.
"""

from __future__ import annotations

import logging

ARG_LIMIT = 256
MESSAGE_LIMIT = 8192


def bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


class BoundedArgs(logging.Filter):
    """Cuts long string arguments and long messages of every record it sees (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and len(record.msg) > MESSAGE_LIMIT:
            record.msg = bounded(record.msg, MESSAGE_LIMIT)
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(bounded(a, ARG_LIMIT) if isinstance(a, str) else a for a in args)
        elif isinstance(args, dict):
            record.args = {k: bounded(v, ARG_LIMIT) if isinstance(v, str) else v for k, v in args.items()}
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Bound what every handler of `logger` (the root logger by default) writes."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, BoundedArgs) for f in handler.filters):
            handler.addFilter(BoundedArgs())
