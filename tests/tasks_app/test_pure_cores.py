"""The pure cores must stay importable without Django."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lifecycle_and_protocol_modules_import_without_django():
    code = (
        "import importlib, pkgutil, sys\n"
        "import tasks_app.lifecycle, tasks_app.protocol as protocol\n"
        "names = [m.name for m in pkgutil.iter_modules(protocol.__path__)]\n"
        "for name in names:\n"
        "    importlib.import_module('tasks_app.protocol.' + name)\n"
        "assert {'convert', 'errors', 'jsonrpc', 'rest', 'versions'} <= set(names), names\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
