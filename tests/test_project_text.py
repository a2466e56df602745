"""The project speaks for itself: no file of it names a path on somebody's machine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|Users|root)/[\w.-]+")


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed]


def test_no_file_names_a_path_of_a_developers_machine():
    """Regression: the router's docstring named the path of a developer's copy of the
    client-routing notes."""
    found = []
    for path in tracked_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [
            f"{path.relative_to(ROOT)}: {match.group()}" for match in MACHINE_PATH.finditer(text)
        ]
    assert found == []
