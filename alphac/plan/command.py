"""`alphac plan SPEC [--json | --dot]`."""

from __future__ import annotations

import json
import sys

from alphac.diagnostics import CompileError, sources_of


def run(spec: str, as_json: bool = False, as_dot: bool = False) -> int:
    from alphac.plan.planner import plan_spec
    from alphac.plan.render import plan_dot, plan_json, plan_text

    try:
        p = plan_spec(spec)
    except CompileError as err:
        cache = sources_of(err.diagnostics)
        if as_json:
            print(json.dumps({"ok": False, "file": spec,
                              "diagnostics": [d.as_json() for d in err.diagnostics]}, indent=2))
        else:
            for d in err.diagnostics:
                print(d.render(cache), file=sys.stderr)
        return 1
    except Exception as exc:  # a planner bug must still end in one line, never a traceback
        print(f"alphac: error: internal error while planning {spec}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(plan_json(p), indent=1, sort_keys=True))
    elif as_dot:
        print(plan_dot(p))
    else:
        print(plan_text(p))
    return 0
