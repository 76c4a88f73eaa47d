"""Group chats: create with a name and members (API.md §5 has no route to add or remove members later)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Awaitable

from ..client import limits
from ..screens.form import Field, FormValues
from .base import Command, OpsHost, identity_list, run_form


def new_group(host: OpsHost) -> None:
    fields = [Field("name", "Name", required=True, max_len=limits.CHAT_GROUP_NAME, wire="name"),
              Field("members", "Members (identities, comma-separated; you are included)", required=True,
                    wire="members", names=True)]

    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.create_group(values["name"], identity_list(values["members"]))

    run_form(host, "New group chat", fields, "Create", submit, lambda _id: "Group chat created",
             after=host.show_channel)


def commands(host: OpsHost) -> Iterator[Command]:
    yield "New group chat", "Name and members (Chat pane: g)", lambda: new_group(host)
