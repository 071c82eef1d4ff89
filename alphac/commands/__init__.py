"""The `alphac` command line: the click group and one module per command. Commands parse
arguments and print; every stage is reached through alphac.driver."""

from __future__ import annotations

import click

from alphac import __version__
from alphac.commands import build, check, inspect, launch, oracle, plan, qualify, verify


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="alphac")
def main() -> None:
    """Compile a declarative spec of a distributed learner into native per-role executables.

    \b
    alphac check SPEC              parse and check; every problem as FILE:LINE:COL: error[CODE]
    alphac plan SPEC               combine tree, phases, per-owner protocol and bytes
    alphac oracle SPEC [--resume CKPT]  independent binary64 evaluation of the declared order
    alphac build SPEC [--role R] [--target T] | --all
    alphac launch SPEC             run every owner on 127.0.0.1 and compare with the oracle
    alphac launch SPEC --emit slurm|mpirun  files for an existing engine to run them
    alphac verify RUN_DIR SPEC     the outputs of a run any launcher started, against the oracle
    alphac qualify [--gate G] [--gpu] [--db FILE]  the gate suite on this hardware, recorded;
                                   --report, --html FILE: the recorded runs
    alphac inspect EXE|CKPT|OUT    an executable's embedded plan; a checkpoint, verified;
                                   an owner's output file
    """


for _module in (check, plan, oracle, build, launch, verify, inspect, qualify):
    main.add_command(_module.command)

__all__ = ["main"]
