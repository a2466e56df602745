"""``make test-fast`` does not collect the fuzz modules its marker expression leaves out."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import FUZZ_MODULES

ROOT = Path(__file__).resolve().parent.parent


def test_make_test_fast_ignores_exactly_the_fuzz_modules():
    makefile = (ROOT / "Makefile").read_text()
    ignores = re.search(r"^FAST_IGNORE := (.*)$", makefile, re.MULTILINE)
    assert ignores is not None, "the Makefile lost FAST_IGNORE"
    ignored = {part.removeprefix("--ignore=") for part in ignores[1].split()}
    assert ignored == FUZZ_MODULES
    for module in ignored:
        assert (ROOT / module).is_file(), module
