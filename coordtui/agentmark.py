"""Who is who on screen: the one mark beside an agent's name (Inbox, Chat, Who), so a human is never mistaken
for an agent or the reverse. The flag comes from the server (`fromIsAgent`, `isAgent`)."""
from __future__ import annotations

AGENT_MARK = "⚙"  # one cell wide in the terminals we support (text presentation, no variation selector)


def named(name: str, is_agent: bool) -> str:
    """`name`, with the agent mark after it when it is an agent's."""
    return f"{name} {AGENT_MARK}" if is_agent else name
