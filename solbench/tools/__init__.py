"""Clients of the plan and the executors: tuning, Nsight Compute profiling, device and spec info.

    tune.py                            ``solbench tune``: grid search over an implementation's space
                                       (workload.tune_space: the grid and its constraints)
    profile.py, profile_target.py      ``solbench profile``: one case under ncu (the target runs in ncu)
    ncu.py                             ncu's CSV -> counters beside the analytic bytes and FLOPs (pure)
    info.py                            ``solbench info``, ``list``, ``calibrate``; saved runs by name

Nothing below this layer imports it.
"""
