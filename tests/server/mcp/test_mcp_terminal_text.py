"""MCP text never drives a terminal (issue 31): what the tools, the wake resource and the triage prompt say
in text quotes other identities' writing with every terminal control shown as a placeholder, while the
structured content stays the data exactly as the REST API returns it."""
from __future__ import annotations

import pytest

from tests.hostile_text import CONTROLS, PAYLOAD, SHORT, SHOWN, seed
from tests.server.mcp.test_mcp import connect

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


def raw_controls(text: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in CONTROLS if c in text]


async def test_tool_texts_show_placeholders_and_structured_content_keeps_the_data(server):
    seeded = seed(server)
    async with connect(server.url, "bob") as s:
        calls = {"wake": {}, "list_inbox": {}, "search_messages": {"q": "hello"}, "chat_channels": {},
                 "chat_read": {"channelId": seeded.channel_id}, "list_tasks": {}, "list_projects": {},
                 "notebook_search": {}, "notebook_read": {"pageId": seeded.page_id}, "directory": {},
                 "buzz_events": {}, "presence": {}, "doctor": {},
                 "update_task": {"taskId": seeded.task_id, "title": PAYLOAD},
                 "send_message": {"recipient": "alice", "title": PAYLOAD}}
        texts = {}
        for name, arguments in calls.items():
            result = await s.call_tool(name, arguments)
            assert not result.is_error, (name, result.content[0].text)
            texts[name] = [c.text for c in result.content]
            assert not raw_controls("".join(texts[name])), (name, texts[name])
        # Summaries no longer quote others' titles (fence.py): the fenced blocks after the JSON show them.
        assert "⟦untrusted" in texts["notebook_read"][0] and "⟦untrusted" in texts["update_task"][0]
        assert SHOWN in "".join(texts["notebook_read"][2:]) and SHOWN in "".join(texts["update_task"][2:])
        for name in ("list_inbox", "chat_read", "notebook_read", "directory", "buzz_events", "list_tasks"):
            shown = "".join(texts[name][1:])  # the JSON text and the fenced blocks
            assert "\ufffd" in shown, name  # C1 and bidi controls as U+FFFD
            # C0: as JSON escapes in the JSON, as control pictures in a fenced block
            assert "\\u001b]0;PWNED-TITLE\\u0007" in shown or "␛]0;PWNED-TITLE␇" in shown, name
        inbox = (await s.call_tool("list_inbox", {})).structured_content
        assert inbox["messages"][0]["title"] == PAYLOAD  # the data itself is unchanged
        channels = (await s.call_tool("chat_channels", {})).structured_content["channels"]
        assert SHORT in [c.get("name") for c in channels]

        refused = await s.call_tool("chat_read", {"channelId": "x\x1b]0;PWNED\x07\x9b"})
        assert refused.is_error and not raw_controls(refused.content[0].text)

        wake = (await s.read_resource("coord://wake")).contents[0].text
        triage = await s.get_prompt("triage")
        prompt_text = "".join(getattr(m.content, "text", "") or m.content.resource.text for m in triage.messages)
        for text in (wake, prompt_text):
            assert not raw_controls(text)
            # the buzz event's C1 and bidi controls, shown: as placeholders, or as JSON escapes where the
            # text is the server's JSON (jsonstrict.escape_terminal_active)
            assert "\ufffd" in text or ("\\u009b" in text and "\\u202e" in text)
