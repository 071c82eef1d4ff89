"""LLVM through llvmlite: target machines keyed by (triple, cpu, features), the O2 pipeline,
and object emission, with emitted objects cached by what makes them. Never sets fast-math
or contraction options."""

from __future__ import annotations

import functools
import hashlib
import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from alphac.resources import cache_dir, store_kept
from alphac.targets.target import Target

_lock = threading.Lock()
_ready = False


def _init() -> None:
    global _ready
    with _lock:
        if not _ready:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _ready = True


def target_machine(triple: str, cpu: str, features: str) -> llvm.TargetMachine:
    """A fresh target machine per module: LLVM's ELF object-file lowering keeps the
    `llvm.used` globals of every module it has emitted in a pointer set that is never
    cleared, so a reused machine can mistake a new global allocated at a freed address for
    a used one and give it its own retained section, making builds irreproducible."""
    _init()
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=2, reloc="pic", codemodel="default")


@functools.cache
def host_cpu() -> tuple[str, str, frozenset[str]]:
    """This machine's CPU as LLVM sees it: its cpu name, its feature string (sorted) and
    the features it has."""
    _init()
    features = llvm.get_host_cpu_features()
    return (llvm.get_host_cpu_name(), features.flatten(),
            frozenset(name for name, on in features.items() if on))


def machine_for(target: Target) -> llvm.TargetMachine:
    return target_machine(target.triple, target.cpu, target.features)


def prepare(module: ir.Module, target: Target, tm: llvm.TargetMachine | None = None,
            text: str | None = None) -> llvm.ModuleRef:
    """Stamp `module` with the target's triple and data layout, parse, verify, run O2
    (`text`: the stamped module's text, where the caller has it already)."""
    tm = tm or machine_for(target)
    module.triple = target.triple
    module.data_layout = str(tm.target_data)
    ref = llvm.parse_assembly(text if text is not None else str(module))
    ref.verify()
    pto = llvm.create_pipeline_tuning_options(2)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(ref, pb)
    ref.verify()
    return ref


# the newest objects kept in the cache; beyond it the oldest are removed
OBJECTS_KEPT = 1024


def compile_object(module: ir.Module, target: Target) -> bytes:
    """The relocatable object for `module` on `target` (O2, PIC). An object is cached under
    the hash of everything that makes it: LLVM's and llvmlite's versions, the triple, cpu
    and features, the pipeline, and the module's text; a cache that cannot be read or
    written is passed by."""
    tm = machine_for(target)
    module.triple = target.triple
    module.data_layout = str(tm.target_data)
    text = str(module)  # (a large module's text takes as long to make as to hash)
    key = hashlib.sha256("\0".join((
        llvm.__name__, ".".join(map(str, llvm.llvm_version_info)), llvmlite.__version__,
        target.triple, target.cpu, target.features, "O2 pic default", text)).encode()).hexdigest()
    path = _objects_dir() / f"{key[:40]}.o"
    try:
        return path.read_bytes()
    except OSError:
        pass
    obj = tm.emit_object(prepare(module, target, tm, text))
    store_kept(path, obj, OBJECTS_KEPT)
    return obj


# What this process generated and compiled, kept (the newest KEPT of each): modules by key,
# objects by key and target, so that the builds of one deployment's roles, targets and CPU
# levels generate and compile their kernels once (a few ms to a few hundred each).
_MODULES: dict = {}
_OBJECTS: dict = {}
_KEPT = 64
_kept_lock = threading.Lock()


def _kept(memo: dict, key, make):
    if key not in memo:
        if len(memo) >= _KEPT:
            memo.pop(next(iter(memo)))
        memo[key] = make()
    return memo[key]


def compile_kept(key: str, make, target: Target) -> bytes:
    """The target's backend's compile_object(make()), where `key` names what make() returns:
    the module is made once per key in this process, its object compiled once per key and
    target."""
    from alphac.targets import compile_object as backend_compile

    with _kept_lock:  # (a compile stamps the shared module with its triple)
        return _kept(_OBJECTS, (key, target.name, target.triple, target.cpu, target.features),
                     lambda: backend_compile(_kept(_MODULES, key, make), target))


def _objects_dir() -> Path:
    return cache_dir() / "objects"


def compile_assembly(module: ir.Module, target: Target) -> str:
    """The assembly text for `module` on `target` (PTX for the device target)."""
    tm = machine_for(target)
    return tm.emit_assembly(prepare(module, target, tm))
