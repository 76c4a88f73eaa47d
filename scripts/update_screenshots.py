"""Regenerates the pane snapshots and copies them to screenshots/ with readable names.

    python scripts/update_screenshots.py            # run the snapshot tests with --snapshot-update, then copy
    python scripts/update_screenshots.py --copy     # only copy the accepted SVGs
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "tui" / "snapshots" / "__snapshots__" / "test_snapshots"
TARGET = ROOT / "screenshots"


def readable(name: str) -> str:
    match = re.fullmatch(r"test_pane_snapshot\[(\w+)\]\.svg", name)
    if match:
        return f"{match.group(1)}.svg"
    return name.removeprefix("test_").removesuffix("_snapshot.svg") + ".svg"


def main() -> int:
    if "--copy" not in sys.argv:
        result = subprocess.run([sys.executable, "-m", "pytest", "tests/tui/snapshots/test_snapshots.py", "-q",
                                 "--snapshot-update", "-n", "0"], cwd=ROOT)
        if result.returncode != 0:
            return result.returncode
    TARGET.mkdir(exist_ok=True)
    copied = 0
    for svg in sorted(SNAPSHOTS.glob("*.svg")):
        shutil.copyfile(svg, TARGET / readable(svg.name))
        copied += 1
    print(f"copied {copied} screenshots to {TARGET}")
    return 0 if copied else 1


if __name__ == "__main__":
    raise SystemExit(main())
