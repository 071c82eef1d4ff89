"""The independent binary64 oracle: evaluates a checked deployment's declared updates.

It reads the shared IR and nothing of code generation: a separate model of the declared
order, against which every executable's words are compared bit for bit.
"""

from alphac.ir.mutants import NAMES as MUTANTS
from alphac.oracle.driver import ENGINES, OracleResult, OwnerResult, evaluate
from alphac.oracle.refusal import Refusal, Site
from alphac.oracle.resume import Start, start_of

__all__ = ["ENGINES", "MUTANTS", "OracleResult", "OwnerResult", "Refusal", "Site", "Start", "evaluate",
           "start_of"]
