"""No module of the relay, its benchmarks or its scripts over 600 lines (issue 33: modules
with one job).

Every ``.py`` file of ``relay_project``, ``registry``, ``tasks_app``, ``routing``, ``bench``
and ``scripts`` counts, migrations excepted (Django writes them); the tests live outside these
folders.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PACKAGES = ("relay_project", "registry", "tasks_app", "routing", "bench", "scripts")

MOST_LINES = 600


def too_long(root: Path, packages=PACKAGES, most: int = MOST_LINES) -> dict[str, int]:
    """The modules of ``packages`` under ``root`` with more than ``most`` lines, by path."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > most:
                found[path.relative_to(root).as_posix()] = lines
    return found


def _listed(offenders: dict[str, int]) -> str:
    return "\n".join(f"{path}: {lines} lines" for path, lines in sorted(offenders.items()))


def test_no_module_is_over_600_lines():
    offenders = too_long(ROOT)
    assert not offenders, f"modules over {MOST_LINES} lines:\n{_listed(offenders)}"


def test_the_count_reads_every_folder_and_leaves_migrations_out(tmp_path):
    for name, lines in {
        "registry/admin.py": 601,
        "registry/models.py": 600,
        "registry/migrations/0001_initial.py": 900,
        "routing/api/views.py": 700,
        "bench/gateway_bench.py": 1482,
        "bench/common.py": 300,
        "scripts/docs_reference.py": 601,
        "elsewhere/big.py": 900,
    }.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n" * lines, encoding="utf-8")

    assert too_long(tmp_path) == {
        "registry/admin.py": 601,
        "routing/api/views.py": 700,
        "bench/gateway_bench.py": 1482,
        "scripts/docs_reference.py": 601,
    }
