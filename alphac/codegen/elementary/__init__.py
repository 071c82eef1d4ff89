"""The elementary functions of programs, emitted from alphac's own algorithms: no libm, no
`__nv_*`, no intrinsic a target lowers to a library call.

    double alphac_exp(double)    double alphac_log(double)    double alphac_log1p(double)
    double alphac_expm1(double)  double alphac_sigmoid(double) double alphac_tanh(double)

exp, log, log1p and expm1 are *correctly rounded*: the result is the binary64 nearest the
real function's value (ties cannot occur: the values are transcendental but at the exact
points exp(0), log(1), log1p(0), expm1(0), which are handled exactly), subnormal results
rounded once onto the subnormal grid. Every target therefore gives the same word, and the
oracle computes the real function in arbitrary precision and rounds once.

Each is Ziv's strategy in two phases:
  * the fast phase, in binary64 arithmetic (IEEE add, sub, mul, exact products by Dekker's
    splitting, never a fused multiply-add), gives a double-double y_hi + y_lo with a known
    relative error bound e; when rounding y_hi + y_lo*(1 + e) and y_hi + y_lo*(1 - e) gives
    the same word, that word is the correctly rounded result;
  * otherwise the accurate phase computes in two's-complement fixed point with P = 240
    fraction bits (i256 values, i512 products, every step an integer operation, so exact
    and the same on every target): an argument reduction against a constant of 2^-240
    accuracy, a Taylor polynomial truncated far below 2^-200, a 64- or 128-entry table, and
    a final rounding by integer shifts and compares. Its relative error is below 2^-230,
    far beyond the 2^-120 the hardest binary64 cases of exp and log need (Lefevre and
    Muller's worst cases need at most about 2^-118), so its rounding is the correct one.

sigmoid and tanh are *declared algorithms* (docs/language.md "Elementary functions"), each a
fixed sequence of the correctly rounded functions and IEEE basic operations:
    sigmoid(x): a = |x|; e = exp(-a); num = (x >= 0 ? 1 : e); result = num / (1 + e)
    tanh(x):    a = min(|x|, 20); t = expm1(-2 a); r = -t / (t + 2); result = copysign(r, x)
The oracle evaluates the same steps; their error against the real functions is measured by
`alphac conform`.

The functions take finite arguments (programs refuse a non-finite operand before calling
them) and may return a non-finite result (exp(710) is +inf, log(-1) NaN), which the
program's finite-or-refuse check then refuses.

The package: `constants` (names, levels, the constants and tables), `fixed` (fixed-point
emission), `functions` (each function, `define`), `vector` (the branch-free fast phases, the
kernels' module, its IR sha256 and the host-compiled kernels).
"""

from __future__ import annotations

from alphac.codegen.elementary.constants import CORRECTLY_ROUNDED, DECLARED, FUNCTIONS, LEVELS
from alphac.codegen.elementary.functions import define
from alphac.codegen.elementary.vector import define_fast, host, ir_sha256, vector_module

__all__ = ["CORRECTLY_ROUNDED", "DECLARED", "FUNCTIONS", "LEVELS", "define", "define_fast", "host",
           "ir_sha256", "vector_module"]
