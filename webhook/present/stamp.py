"""What a rendered page says about itself: the state generation, when it was rendered, and
whether it reloads. The caller reads the clock (serve, cli): rendering stays pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stamp:
    """``rendered``: a timestamp, as the caller formats it; ``refresh``: seconds between reloads
    (the live `/topology` page), None for a file that does not change (`tasgate map -o html`)."""

    generation: int
    rendered: str
    refresh: int | None = None

    @property
    def text(self) -> str:
        again = f" · reloads every {self.refresh} s" if self.refresh else ""
        return f"state generation {self.generation} · rendered {self.rendered}{again}"
