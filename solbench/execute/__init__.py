"""Orchestration's second half: executors take a prepared plan and return results.

    run.run(files, options)     one device (workers or in-process), or sharded (lanes, Ray)
    session.measure_units       the run loop on one executor: rounds, workloads, cases, impls
    shard / lanes               cases over several local GPUs (``--devices``)
    ray_cluster                 cases over the GPUs of a Ray cluster (``--executor ray``)
    ab / alternate              two checkouts measured in one invocation (``solbench ab``)
    group                       multi-rank tasks (collectives) on a group of workers

Executors receive everything as data (:class:`solbench.plan.prepare.Prepared`); they import the
plan and the measurement layers, never the API above them.
"""
