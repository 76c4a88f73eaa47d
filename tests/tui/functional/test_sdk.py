"""The SDK against the real server, and its tolerance of other v1 servers' error bodies, ids and timestamps."""
from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest

from coordtui.client.api import ApiError, ConnectionFailed, CoordClient
from coordtui.client.models import Channel, Message, parse_time
from tests.conftest import TOKENS


async def test_verify_against_the_real_server(server):
    async with CoordClient(server.url, TOKENS["admin"]) as api:
        who = await api.verify()
    assert who.identity == "admin" and who.is_admin is True
    async with CoordClient(server.url, "wrong") as api:
        with pytest.raises(ApiError) as refused:
            await api.verify()
    assert refused.value.status == 401 and refused.value.message == "Invalid key"


async def test_unreachable_is_connection_failed():
    async with CoordClient("http://127.0.0.1:9", "x", timeout=2) as api:
        with pytest.raises(ConnectionFailed):
            await api.verify()


def v1_server(handler):
    return httpx.MockTransport(handler)


@pytest.mark.parametrize("body,expected", [
    ({"error": True, "message": "Payload too large"}, "Payload too large"),
    ({"statusCode": 429, "statusMessage": "Too Many Requests"}, "Too Many Requests"),
    ({"error": "Invalid recipient mailbox"}, "Invalid recipient mailbox"),
    ({}, "Internal Server Error"),
])
async def test_error_text_from_other_v1_servers(body, expected):
    status = 429 if "statusCode" in body else (500 if not body else 400)
    transport = v1_server(lambda request: httpx.Response(status, json=body))
    async with CoordClient("http://v1.test", "t", transport=transport) as api:
        with pytest.raises(ApiError) as refused:
            await api.verify()
    assert refused.value.message == expected
    assert refused.value.status == status


async def test_snake_case_rows_with_string_ids_and_db_timestamps():
    rows = {"messages": [{"id": "42", "recipient": "bob", "sender": "alice", "title": "T", "body": "B",
                          "status": "unread", "urgent": False, "created_at": "2026-02-17 12:00:00.123+00",
                          "thread_id": None, "response_waiting": True}]}
    channels = {"channels": [{"id": "c1", "type": "group", "name": "ops", "members": [{"identity": "bob"}],
                              "unread_count": "3", "last_message": {"id": "5", "body": "hi",
                                                                    "created_at": "2026-02-17 12:00:01+00"}}]}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=rows if "search" in request.url.path else channels)

    async with CoordClient("http://v1.test", "t", transport=v1_server(handler)) as api:
        [message] = await api.search_inbox("x")
        [channel] = await api.channels()
    assert isinstance(message, Message) and message.id == 42 and message.response_waiting is True
    assert message.created_at == datetime(2026, 2, 17, 12, 0, 0, 123000, tzinfo=timezone.utc)
    assert isinstance(channel, Channel) and channel.unread == 3 and channel.label("alice") == "#ops"
    assert channel.last_at == datetime(2026, 2, 17, 12, 0, 1, tzinfo=timezone.utc)


def test_parse_time_variants():
    assert parse_time("2026-02-17T12:00:00.000Z") == datetime(2026, 2, 17, 12, tzinfo=timezone.utc)
    assert parse_time("2026-02-17T14:00:00+02:00") == datetime(2026, 2, 17, 12, tzinfo=timezone.utc)
    assert parse_time("2026-02-17 12:00:00") == datetime(2026, 2, 17, 12, tzinfo=timezone.utc)
    assert parse_time("garbage") is None and parse_time(None) is None


def test_one_tls_context_per_process_and_none_for_plain_http():
    from coordtui.client.api import tls_for
    assert tls_for("http://127.0.0.1:8420") is False
    context = tls_for("https://coord.example.com")
    assert context is tls_for("https://other.example.com") and context.verify_mode.name == "CERT_REQUIRED"
