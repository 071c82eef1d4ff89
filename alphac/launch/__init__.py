"""launch stage: run every owner of a deployment as a native process on 127.0.0.1 and
compare each with the oracle.

    launcher  build what is missing, run a plan, compare word for word (the API)
    runner    ports, peers file, process groups, deadline, cleanup
    frames    the frame wire format (for tools and tests that act as a peer)
    results   the owners' output files
    cache     the embedded metadata and when an executable is stale
    session   builds cached per process (tests, benchmarks)

It loads, plans and builds through alphac.driver; `alphac launch` is alphac.commands.launch.
"""
