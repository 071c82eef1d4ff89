"""Option types the commands share."""

from __future__ import annotations

import click

from alphac import driver


class UpdateCount(click.IntRange):
    """--rounds N: a whole number of updates, 0 to driver.MAX_ROUNDS. Anything else (-1,
    2.5, 1e9, 10**20) is a usage error naming the flag and the range, exit 2."""

    name = "updates"

    def __init__(self) -> None:
        super().__init__(min=0, max=driver.MAX_ROUNDS)

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            text = value.strip()
            if not (text.isdigit() or (text[:1] in "+-" and text[1:].isdigit())):
                self.fail(f"{value!r} is not a whole number of updates; give 0 to "
                          f"{driver.MAX_ROUNDS}", param, ctx)
        return super().convert(value, param, ctx)


ROUNDS = UpdateCount()
