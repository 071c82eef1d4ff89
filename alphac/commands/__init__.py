"""The `alphac` command line: the click group and one module per command. Commands parse
arguments and print; every stage is reached through alphac.driver."""

from __future__ import annotations

import importlib
import os
import sys

import click

from alphac import __version__

# alphac never lets BLAS compute anything (every order is declared); numpy's OpenBLAS would
# still start a thread per core when it is imported, a tenth of a second of CPU per command.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# The commands, in the order --help lists them, each the `command` of its module: imported
# only when it runs, so `alphac --version` and `alphac check` do not
# pay for the launcher, the targets and the code generator.
COMMANDS = ("check", "plan", "oracle", "build", "launch", "verify", "inspect", "qualify",
            "conform", "explain", "clean")
# Each command's summary, the first paragraph of its help: what `alphac --help` lists
# without importing a command module (tests/e2e/test_cli_hygiene.py keeps them equal).
SUMMARIES = {
    "check": "Parse and check SPEC (`-`: read it from stdin). Exit 0 with one `ok` line, or 1 with "
             "every diagnostic.",
    "plan": "Plan SPEC's deployment: partitioning and coordinate blocks, combine tree, phases, shard "
            "maps, each owner's protocol and bytes.",
    "oracle": "Evaluate SPEC's deployment with the independent binary64 oracle.",
    "build": "Compile SPEC into native executables, one per role and target; one already in DIR for "
             "the same plan, CPU level, compiler and input files is reported up to date and left as it "
             "is (--force builds it again).",
    "launch": "Build if needed, run every owner on 127.0.0.1, compare each with the oracle; or, with "
              "--emit, write the files Slurm or mpirun runs them from.",
    "verify": "Compare the owners' outputs in RUN_DIR with the oracle's evaluation of SPEC.",
    "inspect": "Show what an executable, a checkpoint directory or an owner's output file holds.",
    "qualify": "Run the gate suite on this hardware and record the run.",
    "conform": "Measure the elementary-function kernels against the real functions; store the evidence.",
    "explain": "Explain CODE (as in error[CODE] or refused: CODE), or list every code by stage.",
    "clean": "Remove the run directories and the executables alphac built in DIR.",
}


class Commands(click.Group):
    """The click group of COMMANDS, loaded on first use. A closed pipe on stdout
    (`alphac ... | head -1`) ends the command quietly with exit 0: what was asked for was
    read, and nothing is left to say. A MemoryError is one line, error[out-of-memory],
    exit 1, never a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries, as click lists them, from SUMMARIES."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit)) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, name: str):
        if name not in COMMANDS:
            return None
        return importlib.import_module(f"alphac.commands.{name}").command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            quiet_stdout()
            raise click.exceptions.Exit(0) from None
        except MemoryError:
            # the last resort where a stage's own bound did not refuse the work first
            print(f"alphac: error[out-of-memory]: alphac {ctx.invoked_subcommand or ''} ran out of "
                  "memory (MemoryError) and stopped", file=sys.stderr)
            raise click.exceptions.Exit(1) from None


def quiet_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone, so that no later write or the
    interpreter's final flush fails again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="alphac")
def main() -> None:
    """Compile a declarative spec of a distributed learner into native per-role executables.

    \b
    alphac check SPEC|-            parse and check; every problem as FILE:LINE:COL: error[CODE]
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
    alphac conform [--count N]     the elementary functions' largest errors in ulps on this
                                   host, stored as evidence a bounded contract names
    alphac explain [CODE]          what a code means and how to fix it; every code by stage
    alphac clean [-o DIR]          remove DIR/runs/ and the executables built in DIR

    Every --json prints one envelope {format, ok, diagnostics, refusals, ...}, on failure
    too (docs/cli.md, docs/schemas/).
    """


__all__ = ["main", "COMMANDS", "SUMMARIES"]
