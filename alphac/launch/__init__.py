"""launch stage: run every owner of a deployment as a native process on 127.0.0.1 and
compare each with the oracle, or write the files an existing engine runs them from, and
judge any launcher's run.

    launcher     build what is missing, run a plan, compare word for word (`launch`)
    plan_run     one run of a plan's owners, settled by its commit record
    report       a run's owners against the oracle, word for word
    beside       the oracle evaluating beside the owners, in a thread
    checkpoints  where a run's checkpoints go, their key, what a run resumes
    errors       LaunchError
    roles        the role table: per owner its role, target, executable and runner
    runner       ports, peers file, process groups, deadline, cleanup
    emit         the Slurm (srun --multi-prog, sbatch) and mpirun (MPMD) files
    verify       a run directory from any launcher, against the oracle
    hostlist     Slurm's hostlist syntax
    results      the owners' output files
    commit       the commit record, and settling a run by it
    cache        the embedded metadata, when an executable is stale, building what is missing

It loads, plans and builds through alphac.driver; `alphac launch` is alphac.commands.launch.
"""
