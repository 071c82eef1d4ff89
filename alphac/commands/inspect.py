"""`alphac inspect PATH [--json]`, by what PATH is:

- an executable: the plan, contract, target and CPU level embedded in its `.alphac`
  section, with what the ELF header says (machine, static or dynamic, size) and, for an
  SM86 executable, its device code (the cubin's SM, the PTX version and target, the kernel
  names);
- a checkpoint directory (`ckpt-<u>/`): its version, identity, learner, inputs, contract,
  layout, regions, manifest tree, shards and fragments and what it resumed from, after
  verifying every hash as a restore does (docs/checkpoints.md); with `--key FILE` its root
  manifest's tag first (else it says the tag was not checked); a checkpoint that does not
  verify prints its refusal and exits 1;
- an owner's output file (ALHAOUT1): its owner, version, protocol, k, m and its words,
  decoded (decimal and hex).

A checkpoint's and an output's words are summarised (every word with --full); `--npy FILE`
writes the parameter words (a checkpoint's logical parameters, or those an output holds)
as a 1-D float64 .npy file (a binary32 checkpoint's: its k values, float32).
"""

from __future__ import annotations

import math
import sys

import click

from alphac import driver
from alphac.commands import report
from alphac.commands.report import error, stage_error
from alphac.commands.words import decimal, decimal32, halves, hex_word, lines


@click.command("inspect")
@click.argument("path", type=str)
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
@click.option("--full", is_flag=True, help="Every word of a checkpoint or output (default: a summary).")
@click.option("--npy", "npy", default=None, metavar="FILE",
              help="Write the parameter words of a checkpoint or output to FILE (.npy, float64; "
                   "a binary32 checkpoint's values, float32).")
@click.option("--key", "key", default=None, metavar="FILE",
              help="Check a checkpoint's tag under this key file (the run's --checkpoint-key, else its --key); "
                   "without it the tag is not checked, and the output says so.")
def command(path: str, as_json: bool, full: bool, npy: str | None, key: str | None) -> None:
    """Show what an executable, a checkpoint directory or an owner's output file holds."""
    sys.exit(run(path, as_json, full, npy, key))


def summary(path: str) -> dict:
    """The embedded metadata (its `format` as `metadata_format`) plus `machine`, `linking`,
    `static` and `size`; TargetError."""
    info = driver.describe(path)
    out = dict(info["metadata"])
    out["metadata_format"] = out.pop("format", None)
    out.update({
        "executable": str(path),
        "machine": info["machine"],
        "linking": "static" if info["static"] else "dynamic",
        "static": info["static"],
        "size": info["size"],
    })
    if info.get("device"):
        out["device"] = info["device"]
    return out


def render(s: dict) -> str:
    contract = s.get("contract", {})
    profile = " ".join(str(contract.get(k, "?")) for k in ("format", "rounding", "subnormals",
                                                             "exceptional"))
    owners = s.get("role_owners", [])
    rows = [
        ("executable", s["executable"]),
        ("machine", f"{s['machine']} ({s.get('triple', '?')}), {s['linking']}, {s['size']} bytes"),
        ("spec", f"{s.get('spec', '?')}  deployment {s.get('deployment', '?')}"),
        ("role", f"{s.get('role', '?')}: owners {', '.join(map(str, owners)) or '-'} "
                 f"of {s.get('owners', '?')}"),
        ("target", str(s.get("target", "?"))),
        ("cpu", _cpu(s.get("cpu") or {})),
        ("topology", str(s.get("topology", "?"))),
        ("protocol", str(s.get("protocol", "?"))),
        ("contract", f"{profile}; relation {contract.get('relation', '?')}; "
                     f"{contract.get('operations', '?')} ops, order sha256 "
                     f"{str(contract.get('order_digest', '?'))[:16]}"),
        ("placement", " ".join(s.get("placement", []))),
        ("updates", str(s.get("updates", "?"))),
    ]
    if s.get("device"):  # an SM86 executable: the device code it embeds
        d = s["device"]
        rows += [("cubin", f"sm_{d['cubin_sm']}, {d['cubin_bytes']} bytes"),
                 ("ptx", f"version {d['ptx_version']}, target {d['ptx_target']}"),
                 ("kernels", ", ".join(d["kernels"]))]
    if s.get("mutant"):  # built as an executed mutant: it computes other words on purpose
        rows.append(("mutant", f"{s['mutant']} (a testing aid: not the declared program)"))
    return _rows(rows)


def _cpu(cpu: dict) -> str:
    needs = " ".join(cpu.get("requires", [])) or "nothing above the baseline"
    return (f"{cpu.get('level', '?')} (LLVM cpu {cpu.get('llvm_cpu', '?')}); "
            f"checks at startup: {needs}")


def _n(n: int, word: str, plural: str = "s") -> str:
    return f"{n} {word}{'' if n == 1 else plural}"


def _rows(rows) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


# ----------------------------------------------------------------------------- checkpoints

def render_checkpoint(c: dict) -> str:
    learner, contract, layout = c["learner"], c["contract"], c["layout"]
    shared = ",".join(map(str, layout["shared"])) or "-"
    v = c["verified"]
    resumed = c["resumed_from"]
    rows = [
        ("checkpoint", c["checkpoint"]),
        ("version", str(c["version"])),
        ("identity", c["identity"]),
        ("learner", f"k {learner['k']} m {learner['m']} s {learner['s']}"
                    f"{'' if learner['storage'] == 'binary64' else ', stored as ' + learner['storage'] + ' pairs'}"
                    "; contribution sha256 "
                    f"{learner['contribution'][:16]}, update sha256 {learner['update'][:16]}"),
        ("inputs", f"samples sha256 {c['inputs']['samples'][:16]}, rate {c['inputs']['rate']}"),
        ("contract", f"{contract['format']} {contract['rounding']} {contract['subnormals']} "
                     f"{contract['exceptional']}; relation {contract['relation']}; topology "
                     f"{contract['topology']}; order sha256 {contract['order_digest'][:16]}"),
        ("layout", f"{layout['owners']} owners; parameters {layout['parameters']}, state "
                   f"{layout['state']}; {layout['words_per_coordinate']} words per coordinate; "
                   f"shared {shared}; blocks of {layout['block_words']}"),
        ("regions", ", ".join(f"{name} {words}" for name, words in c["regions"].items())),
        ("resumed-from", "-" if resumed is None else
         f"version {resumed['version']} ({resumed['contract']} contract), manifest sha256 "
         f"{resumed['sha256'][:16]}"),
        ("verified", f"ok: {_n(v['hashes'], 'sha256 hash', 'es')} ({_n(v['manifests'], 'manifest')}, "
                     f"{_n(v['shards'], 'shard')}, {_n(v['fragments'], 'fragment')}), versions, "
                     "identities and coverage"),
        ("tag", auth_text(c["auth"])),
    ]
    lines = [_rows(rows), "manifests:"]
    for m in c["manifests"]:
        who = "root" if m["owner"] is None else f"owner {m['owner']}"
        kids = ", ".join(f"{k['file']} (owner {k['owner']})" for k in m["children"]) or "-"
        lines.append(f"  {m['file']}  {who}: owners {' '.join(map(str, m['owners']))}; "
                     f"child manifests {kids}; sha256 {m['sha256'][:16]}")
    lines.append("shards:")
    for s in c["shards"]:
        lines.append(f"  {s['file']}  owner {s['owner']}: {s['bytes']} bytes, "
                     f"{_n(len(s['fragments']), 'fragment')}, sha256 {s['sha256'][:16]}")
        for f in s["fragments"]:
            lines.append(f"    {f['region']:<10} offset {f['offset']} words {f['words']} runs "
                         f"{f['runs']} sha256 {f['sha256'][:16]}")
    if "schedule" in c:  # bounded staleness: the version each contribution read
        lines.append("schedule (the version each owner's contributions read):")
        lines += [f"  {r['file']}  owner {r['owner']}: updates {r['first']}..{r['first'] + len(r['reads']) - 1} "
                  f"read {' '.join(map(str, r['reads']))}; sha256 {r['sha256'][:16]}" for r in c["schedule"]]
    return "\n".join(lines)


def auth_text(auth: dict) -> str:
    """What `inspect` says of a checkpoint's tag: checked, or plainly not."""
    if not auth["tagged"]:
        return "none: the checkpoint is not tagged (written by an unkeyed run)"
    if auth["checked"]:
        return "hmac-sha256, checked under the key given"
    return "hmac-sha256, NOT checked (no --key): its hashes prove it whole, not who wrote it"


def checkpoint_refused(exc) -> int:
    """A checkpoint that does not verify: a malformed manifest as its located diagnostic,
    anything else as one line (with the manifest's line when it names one)."""
    if exc.code == "checkpoint-manifest" and exc.line > 0:
        report.located([exc.diagnostic()])
    else:
        where = f"{exc.path}:{exc.line}: " if exc.line > 0 and exc.path else ""
        error(exc.code, where + exc.message)
    return 1


# ----------------------------------------------------------------------------- owner outputs

def describe_output(path: str) -> tuple[dict, dict]:
    """An owner's output file: owner, version, protocol, k, m and word counts, and its words
    by region; TargetError (bad-output) when it does not follow the format."""
    import struct

    from alphac.launch.results import HEAD_WORDS_OWNED, ResultError, read_result

    try:
        r = read_result(path)
        with open(path, "rb") as f:
            head = f.read(8 * HEAD_WORDS_OWNED)
    except ResultError as exc:
        raise driver.TargetError("bad-output", str(exc)) from None
    except OSError as exc:
        raise driver.TargetError("io-error", f"{path}: {exc.strerror or exc}") from None
    fmt = struct.unpack_from("<Q", head, 8)[0]
    owned = r.param_coords is not None
    k, m = struct.unpack_from("<2Q", head, 40) if owned else (len(r.params), len(r.state))
    return {"output": str(path), "output_format": fmt, "owner": r.owner, "version": r.version,
            "protocol": f"{r.protocol:016x}", "k": k, "m": m, "params": len(r.params),
            "state": len(r.state), "holds": "owned words" if owned else "every word",
            "param_coords": None if not owned else list(r.param_coords),
            "state_offsets": None if not owned else list(r.state_offsets),
            **({"reads": list(r.reads)} if r.reads is not None else {})}, {
            "params": r.params, "state": r.state}


def decoded(regions: dict, storage: str = "binary64") -> dict:
    """Each region's words as 16-digit hex and as the binary64 values they are (a binary32
    checkpoint's: the two binary32 values of each word, the low half first; null for a
    value that is not a finite number, which JSON cannot write)."""
    return {name: {"hex": [hex_word(w) for w in words], "values": _values(words, storage)}
            for name, words in regions.items()}


def _values(words, storage: str) -> list[float | None]:
    if storage == "binary32":
        out = [float(decimal32(h)) for w in words for h in halves(w)]
    else:
        out = [float(decimal(w)) for w in words]
    return [v if math.isfinite(v) else None for v in out]


def render_output(o: dict) -> str:
    return _rows([
        ("output", o["output"]),
        ("owner", str(o["owner"])),
        ("version", str(o["version"])),
        ("protocol", o["protocol"]),
        ("learner", f"k {o['k']} m {o['m']}"),
        ("words", f"{o['params']} parameter and {o['state']} state words ({o['holds']}, "
                  f"format {o['output_format']})"),
        *([("reads", " ".join(map(str, o["reads"])) + " (the version each of the run's contributions read)")]
          if "reads" in o else []),
    ])


def run(path: str, as_json: bool, full: bool = False, npy: str | None = None, key: str | None = None) -> int:
    return report.reported("inspect", as_json, lambda: _run(path, full, npy, key))


def _run(path: str, full: bool, npy: str | None, key: str | None = None) -> int:
    kind = driver.path_kind(path)
    words = None  # a checkpoint's or an output's words, by region
    try:
        if key is not None and kind != "checkpoint":
            error("usage", "--key checks a checkpoint directory's tag; this is no checkpoint")
            return 1
        if kind == "checkpoint":
            secret = driver.read_key(key) if key is not None else None
            s, text = driver.inspect_checkpoint(path, secret), render_checkpoint
            words = _regions(driver.checkpoint_words(path, secret))
        elif kind == "output":
            (s, words), text = describe_output(path), render_output
        else:
            s, text = summary(path), render
    except driver.CheckpointError as exc:
        return checkpoint_refused(exc)
    except driver.TargetError as exc:
        return stage_error(exc)
    learner = s.get("learner", {}) if kind == "checkpoint" else {}
    storage = learner.get("storage", "binary64")
    if npy is not None and not _export(words, npy, storage, learner.get("k", 0)):
        return 1
    if report.json_mode():
        report.result(kind=kind, **s, **({} if words is None else {"words": decoded(words, storage)}),
                      **({} if npy is None else {"npy": npy}))
        return 0
    print(text(s))
    if kind == "checkpoint":
        print(f"logical words (version {s['version']}):")
    for name, region in (words or {}).items():
        print("\n".join(lines(name, region, full, storage)))
    return 0


def _regions(words: dict) -> dict:
    return {"params": words.get("parameters", ()), "state": words.get("state", ())}


def _export(words: dict | None, npy: str, storage: str = "binary64", k: int = 0) -> bool:
    """Write the parameter words to `npy` (float64, 1-D; a binary32 checkpoint's k values,
    float32); False after reporting why not."""
    import numpy as np

    if words is None:
        error("usage", "--npy exports the words of a checkpoint or an owner's output file")
        return False
    params = np.asarray(words["params"], dtype="<u8")
    values = params.view(np.float64) if storage == "binary64" else params.view("<f4")[:k]
    try:
        np.save(npy, values, allow_pickle=False)
    except OSError as exc:
        error("io-error", f"{npy}: {exc.strerror or exc}")
        return False
    return True
