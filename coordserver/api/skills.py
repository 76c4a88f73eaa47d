"""Skill docs: markdown pages for agents, served without auth or rate limits.

Pages are the files in coordserver/skills: `<page>.md`, plus the reference monitor `script.py`.
The overview (skill.md) gets the list of pages built from the files present, so a page added by
any area appears there without editing the overview.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from quart import Blueprint

from ..context import coord
from ..errors import NotFound
from .common import accepts

bp = Blueprint("skills", __name__, url_prefix="/api")

SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"
OVERVIEW = "skill"
ALIASES = {"buzz": "broadcast"}
_PAGE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,49}$")
_MARKDOWN = {"Content-Type": "text/markdown; charset=utf-8"}
_PAGE_LIST_MARK = "{{PAGES}}"


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


def _page_list(base_url: str) -> str:
    lines = []
    for name in page_names():
        target = ALIASES.get(name)
        summary = f"alias of `{target}`" if target else _summary(name)
        lines.append(f"- `GET /api/skill/{name}` ({base_url}/api/skill/{name}): {summary}")
    lines.append(f"- `GET /api/skill/script` ({base_url}/api/skill/script): a reference SSE monitor client "
                 "(Python, standard library only)")
    return "\n".join(lines)


@bp.get("/skill")
@accepts(media="text/markdown")
async def overview():
    text = (SKILLS_DIR / f"{OVERVIEW}.md").read_text(encoding="utf-8")
    return text.replace(_PAGE_LIST_MARK, _page_list(coord().settings.base_url)), 200, _MARKDOWN


@bp.get("/skill/<page>")
@accepts(media=("text/markdown", "text/plain"))
async def page(page: str):
    if page == "script":
        return ((SKILLS_DIR / "script.py").read_text(encoding="utf-8"), 200,
                {"Content-Type": "text/plain; charset=utf-8"})
    name = ALIASES.get(page, page)
    path = SKILLS_DIR / f"{name}.md"
    if not _PAGE_NAME.match(page) or name == OVERVIEW or not path.is_file():
        raise NotFound(f"No skill page named '{page}'. GET /api/skill lists them.")
    return path.read_text(encoding="utf-8"), 200, _MARKDOWN
