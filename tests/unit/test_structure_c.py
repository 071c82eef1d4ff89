"""The C runtime's files call only downwards: every call from one file of alphac/runtime/
into a function another defines names a file earlier in the layer order below, every
`#include "..."` of a header names a header earlier in the header order, and so neither
graph has a cycle (as tests/unit/test_structure.py holds the Python stages to their order)."""

from __future__ import annotations

import re
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "alphac" / "runtime"

# Lowest first, by concern: a file may call only the files before it.
LAYERS = {
    "base": ["fail.c", "digest.c"],
    "frames and auth": ["auth.c", "frame.c"],
    "storage and registers": ["store.c", "mem.c"],
    "connections and transport": ["io.c", "ring.c", "xfer.c", "transport.c", "connect.c"],
    "durability": ["output.c", "ckpt.c", "manifest.c", "restore.c"],
    "device": ["device/cuda.c"],
    "engine and command line": ["hostlist.c", "engine.c", "peers.c", "cpu.c", "status.c", "cli.c", "arith.c",
                                "ops.c", "main.c", "embed.c"],
}
ORDER = [f for files in LAYERS.values() for f in files]
RANK = {f: i for i, f in enumerate(ORDER)}
CONCERN = {f: i for i, files in enumerate(LAYERS.values()) for f in files}

# struct rt's parts (alphac/runtime/rt.h), by the concern whose header declares each: a file
# reads or writes a part only at its own concern or one below (a file of a lower concern
# never reaches up into a higher one's state); the fields of struct rt itself are the run's
# (the image, owner, protocol, run id, ...), below every concern.
PARTS = {"auth": "frames and auth", "store": "storage and registers", "net": "connections and transport",
         "pub": "durability", "ck": "durability", "dev": "device", "cli": "engine and command line"}
PART = re.compile(r"\brt(?:->|\.)(" + "|".join(PARTS) + r")\.")

# Headers, lowest first: one per concern, then rt.h, the state they make up, then those
# private to the restore's two files and to the ops' two; a header includes only those before it. The generated headers come from alphac/image/cheader.py
# and alphac/targets/runtime.py and include none of these.
HEADERS = ["alphac_gen.h", "alphac_cpu.h", "base.h", "frame.h", "store.h", "net.h", "durable.h", "dev.h",
           "engine.h", "rt.h",
           "manifest.h", "arith.h"]
HEADER_RANK = {h: i for i, h in enumerate(HEADERS)}


def strip(text: str) -> str:
    """C text without comments and with empty string and character literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])+'", "' '", text)


DEFINITION = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{]*\)\s*"
                        r"(?:__attribute__\(\([^)]*\)\)\s*)?\{", re.M)
CALL = re.compile(r"\b(\w+)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def definitions(text: str) -> set[str]:
    """The functions a C file defines with external linkage (not static)."""
    return {m.group(1) for m in DEFINITION.finditer(strip(text))} - {"if", "for", "while", "switch", "return"}


def calls(text: str) -> set[str]:
    return {m.group(1) for m in CALL.finditer(strip(text))}


def sources() -> dict[str, str]:
    return {p.relative_to(RUNTIME).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(RUNTIME.rglob("*.c")) if "tools" not in p.parts}


def headers() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(RUNTIME.glob("*.h"))}


def call_edges(files: dict[str, str]) -> dict[tuple[str, str], set[str]]:
    """(caller file, callee file) -> the functions called, for every call across files."""
    owner: dict[str, str] = {}
    for name, text in files.items():
        for fn in definitions(text):
            owner.setdefault(fn, name)
    edges: dict[tuple[str, str], set[str]] = {}
    for name, text in files.items():
        for fn in calls(text):
            where = owner.get(fn)
            if where and where != name:
                edges.setdefault((name, where), set()).add(fn)
    return edges


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_every_runtime_file_has_a_layer():
    stray = sorted(set(sources()) - set(ORDER)) + sorted(set(headers()) - set(HEADERS))
    assert not stray, f"not in the layer order of tests/unit/test_structure_c.py: {stray}"


def test_a_file_calls_only_the_files_below_it():
    bad = [f"{a} calls {b}: {', '.join(sorted(fns))}" for (a, b), fns in sorted(call_edges(sources()).items())
           if RANK[b] >= RANK[a]]
    assert not bad, "calls against the layer order:\n" + "\n".join(bad)


def test_the_call_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for a, b in call_edges(sources()):
        graph.setdefault(a, set()).add(b)
    assert cycle(graph) is None, "a cycle between runtime files: " + " -> ".join(cycle(graph) or [])


def test_a_file_reaches_only_the_state_of_its_concern_or_below():
    concerns = list(LAYERS)
    bad = sorted({f"{name} uses rt->{part}" for name, text in sources().items()
                  for part in PART.findall(strip(text))
                  if concerns.index(PARTS[part]) > CONCERN[name]})
    assert not bad, "state reached from a lower concern:\n" + "\n".join(bad)


def test_a_header_includes_only_the_headers_before_it():
    bad = []
    for name, text in headers().items():
        for inc in INCLUDE.findall(text):
            if HEADER_RANK.get(inc, len(HEADERS)) >= HEADER_RANK[name]:
                bad.append(f"{name} includes {inc}")
    assert not bad, "\n".join(bad)


def test_the_c_files_include_headers_only():
    known = set(HEADERS) | {f"../{h}" for h in HEADERS}
    bad = [f"{name} includes {inc}" for name, text in sources().items() for inc in INCLUDE.findall(text)
           if inc not in known]
    assert not bad, "\n".join(bad)


def test_the_parser_finds_definitions_calls_and_skips_comments_and_statics():
    text = ("static int helper(int x) { return x; }\n"
            "int rt_a(struct rt *rt) {\n"
            "    /* rt_c(rt) in a comment */ const char *s = \"rt_d(\";\n"
            "    return rt_b(rt) + helper(1);\n"
            "}\n"
            "int rt_w(struct rt *rt) __attribute__((weak));\n"
            "void *rt_e(void) {\n    return 0;\n}\n")
    assert definitions(text) == {"rt_a", "rt_e"}
    assert {"rt_b", "helper"} <= calls(text) and not {"rt_c", "rt_d"} & calls(text)
    edges = call_edges({"x.c": "int rt_x(void) { return rt_y(); }\n", "y.c": "int rt_y(void) { return rt_x(); }\n"})
    assert set(edges) == {("x.c", "y.c"), ("y.c", "x.c")}
    assert cycle({a: {b} for a, b in edges}) is not None
    assert PART.findall("rt->net.fds[0] = rt->auth.sent.buf != 0; rt.pub.committed; rt->n;") == ["net", "auth", "pub"]


def test_the_checkpoint_format_constants_come_from_the_generated_header():
    """The manifest head, key label, root manifest's name and shard magic and format are
    alphac/checkpoint/manifest.py's, generated into alphac_gen.h (CKPT_*): no C file spells
    them itself."""
    from alphac.checkpoint import manifest
    from alphac.image.cheader import runtime_header

    header = runtime_header()
    for name in ("CKPT_HEAD", "CKPT_KEY_LABEL", "CKPT_ROOT_MANIFEST", "CKPT_SHARD_MAGIC", "CKPT_SHARD_FORMAT",
                 "CKPT_REGION_NAME"):
        assert f"#define {name}" in header
    texts = {**sources(), **headers()}
    spelled = [manifest.HEAD, manifest.CHECKPOINT_KEY_LABEL, manifest.ROOT_MANIFEST, f"{manifest.SHARD_MAGIC:x}"]
    bad = [f"{name}: {s}" for name, text in texts.items() for s in spelled
           if s.lower() in re.sub(r"/\*.*?\*/", " ", text, flags=re.S).lower()]
    bad += [f"{name}: #define {d}" for name, text in texts.items()
            for d in re.findall(r"#define\s+(\w*SHARD_(?:MAGIC|FORMAT))\b", text)]
    assert not bad, "checkpoint constants spelled in C:\n" + "\n".join(bad)
