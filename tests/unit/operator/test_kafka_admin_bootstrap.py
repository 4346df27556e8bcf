"""A comma-separated bootstrap list is tried in order, as a Kafka client's bootstrap.servers."""

import asyncio
import socket

import pytest

from flotilla_operator.clients import kafka_admin


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_address_is_tried_and_the_error_names_the_last():
    a, b = closed_port(), closed_port()
    with pytest.raises(kafka_admin.AdminError, match=f"cannot connect to 127.0.0.1:{b}"):
        asyncio.run(kafka_admin.brokers(f"127.0.0.1:{a}, 127.0.0.1:{b}"))
