"""Every log line is bounded, whatever a client sends (issue 38): a 500 KiB group id quoted as an
argument, or a message formatted before logging, makes a line of a few hundred characters."""

from __future__ import annotations

import io
import logging

from broker import bounded_logging


def _logger(name: str) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    bounded_logging.install(logger)
    return logger, out


def test_long_arguments_and_messages_are_cut_and_say_how_long_they_were():
    logger, out = _logger("bounded-test")
    huge = "g" * 512_000
    logger.info("group %s: member %s joined", huge, "m-1")
    logger.info("user %(user)s refused", {"user": huge})
    logger.warning(f"preformatted {huge}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert all(len(line) < bounded_logging.MESSAGE_LIMIT + 100 for line in lines), [len(x) for x in lines]
    assert lines[0].endswith("(512,000 characters): member m-1 joined") and len(lines[0]) < 400
    assert "512,000 characters" in lines[1] and len(lines[1]) < 400
    assert "512,013 characters" in lines[2]


def test_short_lines_and_other_arguments_are_untouched():
    logger, out = _logger("bounded-test-short")
    logger.info("partition %s-%d at offset %d", "t", 3, 42)
    assert out.getvalue() == "partition t-3 at offset 42\n"
    bounded_logging.install(logger)  # installing twice adds no second filter
    assert len(logger.handlers[0].filters) == 1
