"""Orchestration's first half: what a run will measure, decided before anything runs.

    options.RunOptions         the knobs of a run (the documented protocol by default)
    workloads.plan(files)      workload files -> Planned (cases expanded, every op costed)
    workloads.dry_run(...)     FLOPs, bytes and T_SOL against a spec, nothing measured
    device.detect(...)         the device to measure on, scored against datasheet or measured peaks
    prepare.prepare(...)       a plan for one detected device -> Prepared (units, settings, empty run)
    tuned.load_tuned(path)     a tuned-configuration file (``solbench tune``) applied per case

Executors (:mod:`solbench.execute`) take a Prepared and return results; nothing here imports them.
"""
