"""Located diagnostics: spans, codes, rendering. Every refusal of the toolchain is one of these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)  # slots: a spec's every number has one (56 bytes, not 150)
class Span:
    """A source range; 1-based line and column. Never takes part in node equality."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<none>", 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span = NO_SPAN
    notes: tuple[str, ...] = ()
    severity: str = "error"

    def render(self, sources: "SourceCache | None" = None) -> str:
        """`FILE:LINE:COL: error[CODE]: message`, the source line, a caret, then notes."""
        head = f"{self.span}: {self.severity}[{self.code}]: {self.message}"
        lines = [head]
        text = sources.line(self.span.file, self.span.line) if sources else None
        if text is not None:
            shown = text.expandtabs(1)
            lines.append(f"  {shown}")
            width = 1
            if self.span.end_line == self.span.line and self.span.end_col > self.span.col:
                width = self.span.end_col - self.span.col
            lines.append("  " + " " * (self.span.col - 1) + "^" + "~" * (width - 1))
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def as_json(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
            "col": self.span.col,
            "end_line": self.span.end_line or self.span.line,
            "end_col": self.span.end_col or self.span.col,
            "notes": list(self.notes),
            "severity": self.severity,
        }


class SourceCache:
    """Source texts by file name, for rendering the offending line under a diagnostic."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def add(self, name: str, text: str) -> None:
        self._lines[name] = text.splitlines()

    def line(self, name: str, line: int) -> str | None:
        lines = self._lines.get(name)
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]


def sources_of(diagnostics) -> SourceCache:
    """The texts of the files the diagnostics point into, where readable (a diagnostic whose
    file cannot be read still prints its location and message)."""
    cache = SourceCache()
    for name in {d.span.file for d in diagnostics}:
        try:
            with open(name, encoding="utf-8") as fh:
                cache.add(name, fh.read())
        except (OSError, UnicodeDecodeError, ValueError):
            pass
    return cache


def render_all(diagnostics, suppressed=None, sources: SourceCache | None = None) -> str:
    """Every diagnostic rendered with its source line and caret (from `sources`, by default
    the files read again), in order, then the line saying how many more were not kept
    (`suppressed`, by default the list's own)."""
    cache = sources_of(diagnostics) if sources is None else sources
    lines = [d.render(cache) for d in diagnostics]
    note = suppressed_note(getattr(diagnostics, "suppressed", {}) if suppressed is None else suppressed)
    if note:
        lines.append(note)
    return "\n".join(lines)


# How many diagnostics a bag keeps: at most MAX_PER_CODE of one code and MAX_KEPT in all.
# The rest are only counted (`Diagnostics.suppressed`), so that a spec with a million
# faults costs neither a million diagnostics' memory nor their output.
MAX_PER_CODE = 20
MAX_KEPT = 200


def suppressed_note(suppressed: dict) -> str | None:
    """The line that ends a capped report: `note: 1048556 more diagnostics not shown
    (role-owner-out-of-range: 1048556); at most 20 of one code and 200 in all are listed`,
    codes by count, most first. None when nothing was suppressed."""
    total = sum(suppressed.values())
    if not total:
        return None
    codes = ", ".join(f"{code}: {n}" for code, n in
                      sorted(suppressed.items(), key=lambda item: (-item[1], item[0])))
    return (f"note: {total} more diagnostic{'' if total == 1 else 's'} not shown ({codes}); "
            f"at most {MAX_PER_CODE} of one code and {MAX_KEPT} in all are listed")


class Diagnostics(list):
    """The diagnostics a bag kept, in order, plus `suppressed`: how many more of each code
    were reported beyond the caps."""

    def __init__(self, items=(), suppressed: dict | None = None):
        super().__init__(items)
        self.suppressed: dict[str, int] = dict(suppressed or {})

    @property
    def total(self) -> int:
        """Every diagnostic reported, kept or not."""
        return len(self) + sum(self.suppressed.values())

    def note(self) -> str | None:
        return suppressed_note(self.suppressed)


class CompileError(Exception):
    """Raised to abort a stage; carries every diagnostic collected so far (capped as a bag
    caps them; `diagnostics.suppressed` counts the rest)."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        bag = DiagnosticBag()
        bag.extend(diagnostics)
        self.diagnostics = bag.items
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in self.diagnostics))

    @property
    def suppressed(self) -> dict[str, int]:
        return self.diagnostics.suppressed


@dataclass
class DiagnosticBag:
    """Collects every problem of a stage; `raise_if_any` fails once with all of them.

    It keeps at most MAX_PER_CODE diagnostics of one code and MAX_KEPT in all; the others
    are counted in `items.suppressed`. `count` is every diagnostic reported, kept or not:
    compare it before and after a step to learn whether the step reported anything."""

    items: Diagnostics = field(default_factory=Diagnostics)
    _kept: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.items, Diagnostics):
            self.items = Diagnostics(self.items)
        for d in self.items:
            self._kept[d.code] = self._kept.get(d.code, 0) + 1

    @property
    def count(self) -> int:
        return self.items.total

    @property
    def suppressed(self) -> dict[str, int]:
        return self.items.suppressed

    def _keeps(self, code: str) -> bool:
        if self._kept.get(code, 0) >= MAX_PER_CODE or len(self.items) >= MAX_KEPT:
            self.items.suppressed[code] = self.items.suppressed.get(code, 0) + 1
            return False
        self._kept[code] = self._kept.get(code, 0) + 1
        return True

    def skip(self, code: str) -> bool:
        """Count a diagnostic of `code` without making it when it would not be kept anyway;
        True if so. For loops that may report very many: `if not bag.skip(code):
        bag.error(code, ...)` formats no message that nobody will see."""
        if self._kept.get(code, 0) >= MAX_PER_CODE or len(self.items) >= MAX_KEPT:
            self.items.suppressed[code] = self.items.suppressed.get(code, 0) + 1
            return True
        return False

    def add(self, d: Diagnostic) -> None:
        if self._keeps(d.code):
            self.items.append(d)

    def extend(self, diagnostics) -> None:
        """Add diagnostics of another stage or bag, and what it counted without keeping."""
        for d in diagnostics:
            self.add(d)
        for code, n in getattr(diagnostics, "suppressed", {}).items():
            self.items.suppressed[code] = self.items.suppressed.get(code, 0) + n

    def error(self, code: str, message: str, span: Span = NO_SPAN, notes=()) -> None:
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, f"diagnostic code {code!r} is not in the catalogue"
        if self._keeps(code):
            self.items.append(Diagnostic(code, message, span, tuple(notes)))

    def raise_if_any(self) -> None:
        if self.items:
            raise CompileError(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


# ----------------------------------------------------------------------------- suggestions

def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of one character."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def nearest(name: str, choices, limit: int = 3) -> list[str]:
    """The choices closest to `name` (ignoring case) and equally close, at most `limit`,
    within a third of the longer name's length (at least 2 edits): what "did you mean"
    offers."""
    scored = []
    for choice in set(choices):
        d = edit_distance(name.lower(), choice.lower())
        if d <= max(2, max(len(name), len(choice)) // 3) and choice != name:
            scored.append((d, choice))
    scored.sort()
    return [choice for d, choice in scored[:limit] if d == scored[0][0]]


def did_you_mean(name: str, choices) -> str | None:
    """`did you mean X?` (or `X or Y?`) for the nearest choices, or None."""
    close = nearest(name, choices)
    if not close:
        return None
    listed = ", ".join(close[:-1]) + " or " + close[-1] if len(close) > 1 else close[0]
    return f"did you mean {listed}?"


def hinted(message: str, name: str, choices) -> str:
    """`message` followed by `; did you mean X?` when a choice is close to `name`."""
    hint = did_you_mean(name, choices)
    return f"{message}; {hint}" if hint else message
