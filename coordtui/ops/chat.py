"""Group chats: create with a name and members (API.md §5 has no route to add or remove members later)."""
from __future__ import annotations

from ..client import limits
from ..screens.form import Field
from .base import identity_list, run_form


def new_group(app) -> None:
    fields = [Field("name", "Name", required=True, max_len=limits.CHAT_GROUP_NAME, wire="name"),
              Field("members", "Members (identities, comma-separated; you are included)", required=True,
                    wire="members")]

    def submit(values: dict):
        return app.client.create_group(values["name"], identity_list(values["members"]))

    def opened(channel_id: str) -> None:
        chat = app.pane("chat")
        app.action_pane("chat")
        chat.request_reload()
        app.call_later(lambda: chat.open_channel(channel_id))
    run_form(app, "New group chat", fields, "Create", submit, lambda _id: "Group chat created", after=opened)


def commands(app, _data=None):
    yield "New group chat", "Name and members (Chat pane: g)", lambda: new_group(app)
