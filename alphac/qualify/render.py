"""A qualification run, and the tracker's history, as text and as one HTML page."""

from __future__ import annotations

import html

from alphac.qualify.tracker import RunRecord


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run_table(run: RunRecord) -> str:
    """One line per gate and control of a run: name, kind, status, seconds, detail."""
    rows = [("gate", "kind", "status", "seconds", "detail")]
    rows += [(g.name, g.kind, g.status, f"{g.seconds:.1f}", g.detail) for g in run.gates]
    return _table(rows)


def _tree(run: RunRecord) -> str:
    if run.build.git_tree is None:
        return "-"
    return run.build.git_tree[:12] + ("+" if run.build.git_dirty else "")


def _host(run: RunRecord) -> str:
    gpu = ", ".join(g.name for g in run.host.gpus) or "no GPU"
    return f"{run.host.cpu}; {gpu}"


def history_table(runs: list[RunRecord]) -> str:
    """One line per run, oldest first: id, time, result, version, git tree (`+`: with
    changes HEAD does not hold), host, and each gate's status."""
    rows = [("run", "started", "result", "version", "tree", "host", "gates")]
    rows += [(r.id, r.started, r.result, r.build.version, _tree(r), _host(r),
              " ".join(f"{g.name}:{g.status}" for g in r.gates)) for r in runs]
    return _table(rows)


def history_html(runs: list[RunRecord]) -> str:
    """A page with one row per run; a gate's cell shows its status, its detail on hover."""
    names = list(dict.fromkeys(g.name for r in runs for g in r.gates))
    head = ["run", "started", "result", "seconds", "version", "tree", "CPU", "kernel", "qemu", "GPU", *names]

    def cell(text: str, cls: str = "", title: str = "") -> str:
        attrs = (f' class="{cls}"' if cls else "") + (f' title="{html.escape(title)}"' if title else "")
        return f"<td{attrs}>{html.escape(text)}</td>"

    body = []
    for r in runs:
        gates = {g.name: g for g in r.gates}
        gpu = "; ".join(f"{g.name} {g.uuid} driver {g.driver}" for g in r.host.gpus) or "-"
        cells = [cell(r.id), cell(r.started), cell(r.result, r.result), cell(f"{r.seconds:.1f}"),
                 cell(r.build.version), cell(_tree(r), title=r.build.git_tree or ""), cell(r.host.cpu),
                 cell(r.host.kernel), cell(r.host.qemu or "-"), cell(gpu)]
        cells += [cell(gates[n].status, gates[n].status, gates[n].detail) if n in gates else cell("")
                  for n in names]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>alphac qualification runs</title>',
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:2px 6px;font-size:90%}.passed{background:#cfc}.failed{background:#fcc}"
        ".invalid{background:#fc9}.not-run{color:#888}</style></head><body>",
        f"<h1>alphac qualification runs ({len(runs)})</h1>", "<table>",
        "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>", *body, "</table></body></html>", ""])
