"""How deep a JSON text nests, read from its bytes before any parser recurses into it: the
bound every JSON body of the relay is held to (the A2A endpoints' request limits and the REST
APIs' parser). Plain Python, below every app."""

from __future__ import annotations

import itertools
import re


def raw_depth(body: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in a JSON text, brackets inside strings not
    counted. Works on any bytes (for bytes that are not JSON the number means little, and the
    parser refuses them anyway)."""
    # Only brackets and quotes matter: strip everything else away first, in C, so a large
    # body of text costs a translate, not a Python loop over every byte.
    if b"[" not in body and b"{" not in body:
        return 0
    skeleton = body.translate(None, _NOT_STRUCTURE)
    # Strings (with their escapes) go too, so a bracket inside one is not counted.
    return _bracket_depth(_STRING.sub(b"", skeleton))


_STRUCTURE = b'[]{}"\\'
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STRUCTURE)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
# Opening brackets become 1, closing ones -1 (0xFF as a signed byte), anything else 0.
_SIGN = bytes(1 if b in b"[{" else 0xFF if b in b"]}" else 0 for b in range(256))


def _bracket_depth(skeleton: bytes) -> int:
    steps = memoryview(skeleton.translate(_SIGN)).cast("b")
    return max(0, max(itertools.accumulate(steps), default=0))
