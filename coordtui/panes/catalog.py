"""The one list of panes: each one's id (its widget id, keys.toml's `app.pane.<id>`), title (short enough for
nine tabs with badges in 80 columns: the tab, help and README use it), class and key. The app's tabs and key
bindings, the help screen, the tab badges and the snapshot tests are all built from it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import Pane
from .buzz import BuzzPane
from .chat import ChatPane
from .directory import DirectoryPane
from .doctor import DoctorPane
from .inbox import InboxPane
from .notebook import NotebookPane
from .presence import PresencePane
from .swarm import SwarmPane
from .wake import WakePane


@dataclass(frozen=True)
class PaneSpec:
    id: str
    title: str
    cls: type[Pane[Any]]
    key: str  # switches to it from a list; alt+key from anywhere

    @property
    def tab_id(self) -> str:
        return f"tab-{self.id}"


PANES: tuple[PaneSpec, ...] = (
    PaneSpec("wake", "Wake", WakePane, "1"),
    PaneSpec("inbox", "Inbox", InboxPane, "2"),
    PaneSpec("chat", "Chat", ChatPane, "3"),
    PaneSpec("swarm", "Swarm", SwarmPane, "4"),
    PaneSpec("presence", "Who", PresencePane, "5"),
    PaneSpec("doctor", "Doctor", DoctorPane, "6"),
    PaneSpec("notebook", "Notes", NotebookPane, "7"),
    PaneSpec("directory", "Links", DirectoryPane, "8"),
    PaneSpec("buzz", "Buzz", BuzzPane, "9"),
)


def spec_of(pane: Pane[Any]) -> PaneSpec:
    """The list's entry for a pane on screen."""
    return next(spec for spec in PANES if spec.id == pane.id)
