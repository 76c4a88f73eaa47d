"""The skill pages present: their names, aliases and summaries, and the overview's list of them.

Pages are the files in coordserver/skills: `<page>.md`, plus the reference monitor `script.py`.
The overview (skill.md) gets the list of pages built from the files present, so a page added by
any area appears there without editing the overview.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

SKILLS_DIR = Path(__file__).resolve().parent
OVERVIEW = "skill"
ALIASES = {"buzz": "broadcast"}
PAGE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,49}$")
PAGE_LIST_MARK = "{{PAGES}}"


def page_names() -> list[str]:
    """Every page a client may fetch (besides the overview and the script), sorted."""
    names = {p.stem for p in SKILLS_DIR.glob("*.md")} - {OVERVIEW}
    names |= {alias for alias, target in ALIASES.items() if target in names}
    return sorted(names)


@lru_cache(maxsize=64)
def _summary(name: str) -> str:
    """A page's first heading, without the leading '#'s."""
    for line in (SKILLS_DIR / f"{name}.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return name


def page_list(base_url: str) -> str:
    lines = []
    for name in page_names():
        target = ALIASES.get(name)
        summary = f"alias of `{target}`" if target else _summary(name)
        lines.append(f"- `GET /api/skill/{name}` ({base_url}/api/skill/{name}): {summary}")
    lines.append(f"- `GET /api/skill/script` ({base_url}/api/skill/script): a reference SSE monitor client "
                 "(Python, standard library only)")
    return "\n".join(lines)


def overview(base_url: str) -> str:
    """skill.md with the list of pages in place of its mark."""
    text = (SKILLS_DIR / f"{OVERVIEW}.md").read_text(encoding="utf-8")
    return text.replace(PAGE_LIST_MARK, page_list(base_url))


def page(name: str) -> tuple[str, str] | None:
    """A page's text and media type (`script` is the monitor's source), or None if there is no such page."""
    if name == "script":
        return (SKILLS_DIR / "script.py").read_text(encoding="utf-8"), "text/plain; charset=utf-8"
    target = ALIASES.get(name, name)
    path = SKILLS_DIR / f"{target}.md"
    if not PAGE_NAME.match(name) or target == OVERVIEW or not path.is_file():
        return None
    return path.read_text(encoding="utf-8"), "text/markdown; charset=utf-8"
