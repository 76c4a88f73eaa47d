"""The SDK's page versions (list, read, checkpoint, restore) and awareness model against the real server."""
from __future__ import annotations

import pytest

from coordtui.client.api import ApiError, CoordClient
from coordtui.client.notebook import RemoteCursor, cursor_from_state
from tests.conftest import TOKENS


async def test_versions_checkpoint_and_restore_through_the_sdk(server):
    async with CoordClient(server.url, TOKENS["alice"]) as alice, CoordClient(server.url, TOKENS["carol"]) as carol:
        page = await alice.create_page("SDK runbook", "v1 é\n")
        created = (await alice.page_versions(page.id))[0]
        assert created.reason == "created" and created.size == 5 and created.created_by == "alice"
        await alice.update_page(page.id, content="v2 ß\n")
        checkpoint = await alice.checkpoint_page(page.id, "after v2")
        assert checkpoint.label == "after v2" and checkpoint.editors == ["alice"] and checkpoint.content is None
        assert (await alice.page_version(page.id, created.id)).content == "v1 é\n"
        restored, now = await alice.restore_page_version(page.id, created.id)
        assert restored.reason == "restore" and now.content == "v1 é\n"
        assert [v.reason for v in await alice.page_versions(page.id)] == ["restore", "checkpoint", "created"]
        assert [v.reason for v in await alice.page_versions(page.id, limit=1, offset=2)] == ["created"]
        await alice.update_page(page.id, locked=True)
        with pytest.raises(ApiError) as refused:
            await carol.restore_page_version(page.id, checkpoint.id)
        assert refused.value.status == 403 and refused.value.message == "Page is locked"


def test_awareness_states_are_read_leniently_and_neutralised():
    js = cursor_from_state(7, {"user": {"name": "Carol\x1b[2J", "color": "#3584e4"}, "cursor": {"anchor": 4, "head": 1}})
    assert js == RemoteCursor(7, "Carol␛[2J", "#3584e4", 4, 1) and js.selection == (1, 4)
    bare = cursor_from_state(9, {"cursor": {"anchor": "x", "head": True}})
    assert (bare.name, bare.color, bare.anchor, bare.head, bare.selection) == ("editor 9", None, None, None, None)
