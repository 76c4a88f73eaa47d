"""Group chats: create with a name and members (API.md §5 has no route to add or remove members later)."""
from __future__ import annotations

from ..client import limits
from ..screens.form import Field
from .base import identity_list, run_form


def new_group(host) -> None:
    fields = [Field("name", "Name", required=True, max_len=limits.CHAT_GROUP_NAME, wire="name"),
              Field("members", "Members (identities, comma-separated; you are included)", required=True,
                    wire="members")]

    def submit(values: dict):
        return host.client.create_group(values["name"], identity_list(values["members"]))

    run_form(host, "New group chat", fields, "Create", submit, lambda _id: "Group chat created",
             after=host.show_channel)


def commands(host, _data=None):
    yield "New group chat", "Name and members (Chat pane: g)", lambda: new_group(host)
