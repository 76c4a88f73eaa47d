"""The event stream client with coordserver's tagged ids (`1532.kqzvbf`): sent back unchanged as
Last-Event-ID, ordered by their number, and a `resync` (reason `restored`) after a database restore
takes the server's position (`resumeFrom`), so the restored log's events are handed on, not dropped."""
from __future__ import annotations

from tests.tui.functional.test_events import replay, sse


async def test_tagged_ids_go_back_unchanged_and_order_by_number():
    bodies = [
        sse('event: connected\ndata: {"identity":"bob","lastEventId":10,"resumeFrom":"10.abcdef"}\n\n',
            'id: 11.qwerty\nevent: message\ndata: {"type":"message","messageId":1}\n\n',
            'id: 11.qwerty\nevent: message\ndata: {"type":"message","messageId":1}\n\n'),  # a duplicate replay
        sse('event: connected\ndata: {"identity":"bob","lastEventId":12,"resumeFrom":"12.zzzzzz"}\n\n',
            'id: 12.zzzzzz\nevent: chat_message\ndata: {"type":"chat_message","channelId":"c"}\n\n'),
    ]

    events, _states, _resyncs, seen_headers = await replay(bodies)

    assert [(e.type, e.id) for e in events if e.id is not None] == [("message", 11), ("chat_message", 12)]
    assert seen_headers[:3] == [None, "11.qwerty", "12.zzzzzz"]


async def test_resync_restored_takes_the_servers_position_and_keeps_its_events():
    """Before: ids up to 500 of the old log. The restored log's head is 300: its events 301.. are new."""
    bodies = [
        sse('event: connected\ndata: {"identity":"bob","lastEventId":499,"resumeFrom":"499.aaaaaa"}\n\n',
            'id: 500.bbbbbb\nevent: message\ndata: {"type":"message","messageId":1}\n\n'),
        sse('event: connected\ndata: {"identity":"bob","lastEventId":520,"resumeFrom":"520.cccccc"}\n\n',
            'event: resync\ndata: {"type":"resync","reason":"restored","oldestEventId":1}\n\n',
            'id: 521.dddddd\nevent: message\ndata: {"type":"message","messageId":2}\n\n'),
        sse('event: connected\ndata: {"identity":"bob","lastEventId":521,"resumeFrom":"521.dddddd"}\n\n'),
    ]

    events, _states, resyncs, seen_headers = await replay(bodies, connections=4)

    assert [(e.type, e.id) for e in events if e.type == "message"] == [("message", 500), ("message", 521)]
    assert seen_headers[:4] == [None, "500.bbbbbb", "521.dddddd", "521.dddddd"] and resyncs == [1]


async def test_a_restored_resync_before_any_event_resumes_from_the_server_head():
    bodies = [
        sse('event: connected\ndata: {"identity":"bob","lastEventId":40,"resumeFrom":"40.eeeeee"}\n\n',
            'event: resync\ndata: {"type":"resync","reason":"restored","oldestEventId":1}\n\n'),
    ]

    _events, _states, resyncs, seen_headers = await replay(bodies)

    assert seen_headers[1] == "40.eeeeee" and resyncs == [1]
