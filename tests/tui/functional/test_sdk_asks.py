"""The SDK's ask methods against the real server: ask, the wake items of those asked and of the asker, answer (the
second answer's 409), read, list and cancel, as typed objects."""
from __future__ import annotations

import pytest

from coordtui.client.api import ApiError, CoordClient
from coordtui.client.models import Ask
from tests.conftest import TOKENS


async def test_ask_answer_and_read_through_the_sdk(server):
    async with CoordClient(server.url, TOKENS["alice"]) as alice, CoordClient(server.url, TOKENS["bob"]) as bob, \
            CoordClient(server.url, TOKENS["carol"]) as carol:
        made = await alice.create_ask(["bob", "carol"], "Deploy now?", ["Yes", "Not yet"], allow_text=True,
                                      deadline="2099-01-01T00:00:00Z", default_option=2, context={"taskId": "t-1"})
        assert isinstance(made, Ask) and made.open and made.asker == "alice" and made.to == ("bob", "carol")
        assert made.options == ("Yes", "Not yet") and made.default_option == 2 and made.deadline.year == 2099
        assert made.context == {"taskId": "t-1"}
        item = next(i for i in (await bob.wake()).items if i.key == f"ask:{made.id}")
        assert (item.priority, item.asker, item.question, item.options, item.allow_text) == \
            ("high", "alice", "Deploy now?", ("Yes", "Not yet"), True)
        assert [a.id for a in await bob.asks(role="received", status="open")] == [made.id]
        answered = await bob.answer_ask(made.id, option=1)
        assert (answered.status, answered.answered_by, answered.option) == ("answered", "bob", "Yes")
        with pytest.raises(ApiError) as late:
            await carol.answer_ask(made.id, text="no")
        assert late.value.status == 409 and late.value.body["answeredBy"] == "bob"
        outcome = next(i for i in (await alice.wake()).items if i.key == f"ask_result:{made.id}")
        assert (outcome.status, outcome.answered_by, outcome.option, outcome.answer_text) == \
            ("answered", "bob", "Yes", None)
        read = await alice.get_ask(made.id)
        assert read.read_at is not None and not read.open
        assert all(i.source != "ask_result" for i in (await alice.wake()).items)
        withdrawn = await alice.create_ask("carol", "Lunch?", allow_text=True)
        assert (await alice.cancel_ask(withdrawn.id)).status == "cancelled"
        assert [a.id for a in await alice.asks(role="sent")] == [withdrawn.id, made.id]
