"""Which placement engine is in use: the compiled one when it was built, else its pure twin.

A leaf module, so the snapshot layer can ask for the default engine without importing the
package (no cycle). ``IMPLEMENTATION`` names the engine; the webhook refuses to report ready on
the twin unless told to, so a missing build is never silent.
"""

from __future__ import annotations

from scorer import _reference
from scorer.request import Engine

try:
    import scorer._core as _compiled_module
except ImportError:  # the extension was not built: the twin still gives the same answers
    _compiled: Engine | None = None
else:
    _compiled = _compiled_module

IMPLEMENTATION = "compiled" if _compiled is not None else "reference"


def engines() -> dict[str, Engine]:
    """Every engine available here, by name."""
    found: dict[str, Engine] = {"reference": _reference}
    if _compiled is not None:
        found["compiled"] = _compiled
    return found


def default_engine() -> Engine:
    return engines()[IMPLEMENTATION]
