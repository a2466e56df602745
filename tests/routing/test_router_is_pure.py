"""The router is the pure core: importing it must pull in neither Django nor any other package."""

import json
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
before = set(sys.modules)
import routing.router
loaded = {name.partition(".")[0] for name in set(sys.modules) - before}
print(json.dumps({
    "django": "django" in sys.modules,
    "outside_stdlib": sorted(loaded - set(sys.stdlib_module_names) - {"routing", "registry"}),
}))
"""


def test_importing_the_router_in_a_fresh_interpreter_loads_no_django_and_no_package():
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    loaded = json.loads(result.stdout)
    assert loaded["django"] is False
    assert loaded["outside_stdlib"] == []
