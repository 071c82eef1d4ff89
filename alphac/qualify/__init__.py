"""qualify stage: the gate suite on the hardware present, and the tracker that records
every run (`alphac qualify`, docs/qualify.md).

    gates    what each gate and control launches and must show
    suite    one run: the gates, the controls, the verdict, recorded
    host     the host and the build a run ran on
    tracker  the SQLite file of every run
    render   the history as a table and as an HTML page

It launches through alphac.launch and builds through alphac.driver.
"""
