"""Checking of list values: literals, Nat ranges, repeats and file loads, against the caps on
their items and words.

A list of PointwiseAssignment is a program, kept unevaluated (`VProgram`); a list of StdU64
is a word array (`VWords`); `load ... shares` gives per-owner sample rows (`VRows`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from alphac.check import words as W
from alphac.check.modules import ModuleInfo
from alphac.check.values import (ANY, LIST, MAX_ITEMS, NAT, PA, U64, NatRange, Repeated, Ty, VList, VProgram,
                                 VRows, VWords, list_of, nats)
from alphac.syntax import ast


def check_list(ev, info: ModuleInfo, e: ast.Expr, ty: Ty):
    """Check `e` against the list type `ty` for the Evaluator `ev` (evaluate.py); its value,
    or None after reporting."""
    elem = ty.args[0] if ty.args else ANY
    if isinstance(elem, Ty) and elem.key == PA:
        if isinstance(e, (ast.ListLit, ast.Pointwise)):
            return VProgram(e, info, elem.args[1] if len(elem.args) > 1 else ANY, e.span)
        return ev._mismatch(e, ty)
    if isinstance(e, ast.Pointwise):
        return ev._mismatch(e, ty)
    if elem is ANY:
        ev.bag.error("type-mismatch", "the list's element type is not known here", e.span)
        return None
    is_words = elem.key == U64
    if isinstance(e, ast.ListLit):
        limit = W.MAX_WORDS if is_words else MAX_ITEMS
        if len(e.items) > limit:
            ev.bag.error("size-limit", f"a list of {elem} holds at most {limit} items", e.span)
            return None
        if is_words:
            out, spans, ok = [], [], True
            for item in e.items:
                if isinstance(item, ast.SlotAssign):
                    ev.check(info, item, elem)
                    ok = False
                    continue
                w = ev.word(info, item)
                ok = ok and w is not None
                out.append(w or 0)
                spans.append(item.span)
            if not ok:
                return None
            return VWords(np.array(out, dtype=np.uint64), e.span, "", tuple(spans))
        items = [ev.check(info, item, elem) for item in e.items]
        if any(i is None for i in items):
            return None
        return VList(tuple(items), e.span)
    if isinstance(e, ast.RangeLit):
        if elem.key != NAT:
            return ev._mismatch(e, ty)
        lo = ev.check(info, e.lo, Ty(NAT))
        hi = ev.check(info, e.hi, Ty(NAT))
        if lo is None or hi is None:
            return None
        if hi.n < lo.n:
            ev.bag.error("invalid-range", f"the range {lo.n} .. {hi.n} ends before it starts",
                         e.span)
            return None
        if hi.n - lo.n > MAX_ITEMS:
            ev.bag.error("size-limit", f"a list of Nat holds at most {MAX_ITEMS} items", e.span)
            return None
        return VList(NatRange(lo.n, hi.n, e.span), e.span)
    if isinstance(e, ast.Repeat):
        count = ev.nat_const(info, e.count)
        if not isinstance(count, int):
            return None
        limit = W.MAX_WORDS if is_words else MAX_ITEMS
        if count > limit:
            ev.bag.error("size-limit", f"a list of {elem} holds at most {limit} items", e.span)
            return None
        if is_words:
            w = ev.word(info, e.item)
            if w is None:
                return None
            # one word seen N times (read-only, no N words allocated): the learner that
            # reads it measures it against its caps before anything copies it (lower.py)
            return VWords(np.broadcast_to(np.uint64(w), (count,)), e.span)
        item = ev.check(info, e.item, elem)
        return None if item is None else VList(Repeated(item, count), e.span)
    if isinstance(e, ast.Load):
        path = str(Path(info.file).parent / e.path)
        if e.shares is not None:
            inner = elem.args[0] if elem.key == LIST and elem.args else None
            if not (isinstance(inner, Ty) and inner.key == LIST and inner.args
                    and isinstance(inner.args[0], Ty) and inner.args[0].key == U64):
                ev.bag.error("type-mismatch", f"`load ... shares` builds per-owner sample "
                             f"lists, but {ty} is expected here", e.span)
                return None
            shares = ev.check(info, e.shares, list_of(Ty(NAT)))
            if shares is None:
                return None
            return VRows(path, nats(shares), e.span)
        if not is_words:
            ev.bag.error("type-mismatch", f"`load` gives a list of StdU64, but {ty} is "
                         "expected here", e.span)
            return None
        try:
            data = W.load_words(path)
        except W.WordError as exc:
            ev.bag.error(exc.code, exc.message, e.span, exc.notes)
            return None
        if data.ndim not in (1, 2):
            ev.bag.error("load-file", f"{path} holds a {W.shape_text(data.shape)} array; a "
                         ".npy of words is 1-D (a word list) or 2-D (rows)", e.span)
            return None
        shape = data.shape if data.ndim == 2 else ()
        data = data.reshape(-1)
        bad = W.first_non_finite(data)
        if bad >= 0:
            ev.bag.error("non-finite-literal",
                         f"word {bad} of {e.path} is not a finite binary64 number", e.span)
            return None
        return VWords(data, e.span, path, shape=shape)
    return ev._mismatch(e, ty)
