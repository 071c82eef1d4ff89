"""The oracle's refusals: finite-or-refuse and inputs it cannot model, each named by code.

A refusal says where: the update, the program (contribution, update, combine, mean), the
owner and sample for contributions, the statement (its label and span) and the coordinate.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.diagnostics import NO_SPAN, Span


@dataclass(frozen=True)
class Site:
    """Which evaluation is running: update index, program, and for a contribution the owner
    and the sample's position within that owner's share."""

    update: int
    program: str  # "contribution", "update", "combine", "mean"
    owner: int | None = None
    sample: int | None = None

    def describe(self) -> str:
        text = f"update {self.update}: {self.program}"
        if self.owner is not None:
            text += f" of owner {self.owner}"
        if self.sample is not None:
            text += f" sample {self.sample}"
        return text


class Refusal(Exception):
    """The oracle refuses the deployment or one of its updates. `code` is a catalogue code,
    `detail` one line; the other attributes locate a finite-or-refuse failure."""

    def __init__(self, code: str, detail: str, *, site: Site | None = None,
                 statement: str = "", span: Span = NO_SPAN, coordinate: str = "") -> None:
        self.code = code
        self.detail = detail
        self.site = site
        self.statement = statement
        self.span = span
        self.coordinate = coordinate
        super().__init__(f"{code}: {detail}")

    @property
    def update(self) -> int | None:
        return None if self.site is None else self.site.update

    @property
    def program(self) -> str | None:
        return None if self.site is None else self.site.program

    @property
    def owner(self) -> int | None:
        return None if self.site is None else self.site.owner

    def line(self) -> str:
        """What a command prints on stderr."""
        return f"refused: {self.code}: {self.detail}"


def non_finite(site: Site, what: str, *, statement: str = "", span: Span = NO_SPAN,
               coordinate: str = "") -> Refusal:
    """A finite-or-refuse failure: `what` names the value (e.g. `result of div`)."""
    where = site.describe()
    if statement:
        where += f": `{statement}`"
        if span != NO_SPAN:
            where += f" ({span})"
    if coordinate:
        where += f" at {coordinate}"
    return Refusal("non-finite", f"{where}: non-finite {what}", site=site,
                   statement=statement, span=span, coordinate=coordinate)
