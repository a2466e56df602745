"""Renders docs/architecture.dot to docs/architecture.svg with Graphviz's ``dot``.

The SVG carries the SHA-256 of the source it was rendered from in a comment, so a test can tell
that the committed picture matches the committed source without Graphviz installed.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "docs" / "architecture.dot"
PICTURE = ROOT / "docs" / "architecture.svg"
MARK = "<!-- rendered from docs/architecture.dot sha256:{} -->"


def source_hash() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def main() -> None:
    svg = subprocess.run(
        ["dot", "-Tsvg", str(SOURCE)], capture_output=True, text=True, check=True
    ).stdout
    declaration, _, rest = svg.partition("\n")  # the XML declaration must stay first
    PICTURE.write_text(f"{declaration}\n{MARK.format(source_hash())}\n{rest}")


if __name__ == "__main__":
    main()
