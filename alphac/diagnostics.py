"""Located diagnostics: spans, codes, rendering. Every refusal of the toolchain is one of these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
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


def render_all(diagnostics) -> str:
    """Every diagnostic rendered with its source line and caret, in order."""
    cache = sources_of(diagnostics)
    return "\n".join(d.render(cache) for d in diagnostics)


class CompileError(Exception):
    """Raised to abort a stage; carries every diagnostic collected so far."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in self.diagnostics))


@dataclass
class DiagnosticBag:
    """Collects every problem of a stage; `raise_if_any` fails once with all of them."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, code: str, message: str, span: Span = NO_SPAN, notes=()) -> None:
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, f"diagnostic code {code!r} is not in the catalogue"
        self.items.append(Diagnostic(code, message, span, tuple(notes)))

    def raise_if_any(self) -> None:
        if self.items:
            raise CompileError(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)
