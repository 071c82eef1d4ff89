"""alphac: compile a declarative spec of a distributed learner into native per-role executables."""

__version__ = "0.1.0"
