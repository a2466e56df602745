"""The README and the documentation site stay what they promise: short, pictured from the
committed source, and built strictly."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_project_text import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import render_diagram  # noqa: E402


def test_the_readme_is_at_most_150_lines_and_opens_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    assert lines[3].startswith("make up ") and lines[4].startswith("make test ")


def test_the_committed_architecture_picture_was_rendered_from_the_committed_source():
    """Regression guard: editing docs/architecture.dot without `make diagram` leaves the
    README's picture stale."""
    svg = render_diagram.PICTURE.read_text()
    mark = re.search(r"<!-- rendered from docs/architecture.dot sha256:(\w+) -->", svg)
    assert mark, "docs/architecture.svg has no source mark: run make diagram"
    assert mark.group(1) == render_diagram.source_hash(), "run make diagram"


def test_the_architecture_picture_renders_again_the_same():
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")
    rendered = subprocess.run(
        ["dot", "-Tsvg", str(render_diagram.SOURCE)], capture_output=True, text=True, check=True
    ).stdout
    committed = render_diagram.PICTURE.read_text()
    assert re.sub(r"<!--.*?-->\n?", "", rendered, flags=re.S) == re.sub(
        r"<!--.*?-->\n?", "", committed, flags=re.S
    )


def test_the_reference_pages_name_every_setting_and_management_command():
    """They are generated at each build; a regression here means the generator lost some."""
    import docs_reference

    settings_page = docs_reference.settings_page()
    source = (ROOT / "relay_project" / "settings.py").read_text()
    for name in set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z_]+)"', source)):
        assert f"`{name}`" in settings_page, name
    commands_page = docs_reference.commands_page()
    for app in ("registry", "routing", "tasks_app"):
        for command in (ROOT / app / "management" / "commands").glob("[a-z]*.py"):
            assert f"## `{command.stem}`" in commands_page, command.stem
    assert "`/a2a/registry`" in docs_reference.endpoints_page()


def test_the_documentation_site_builds_strictly(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
