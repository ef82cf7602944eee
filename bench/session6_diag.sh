#!/usr/bin/env bash
# Session 6, first look at why 10 GPU tests failed after the compile preload (carry .whl).
set -o pipefail
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-300} log=$OUT/steps.log
. bench/steps.sh
install_wheels || exit 1
step probe 30 bash -c "python3 bench/preload_probe.py 2>&1 | tee $OUT/probe.log; PYTORCH_NVML_BASED_CUDA_CHECK=1 python3 bench/preload_probe.py 2>&1 | tee -a $OUT/probe.log; python3 bench/preload_probe.py triton torch._dynamo torch._inductor.compile_fx 2>&1 | tee -a $OUT/probe.log"
step compiled-cli 90 bash -c "python3 -m solbench run tests/data/compiled.yaml --device cuda -i compiled --repeat 1 -o /tmp/c.json > $OUT/compiled-cli.log 2>&1; echo exit \$? >> $OUT/compiled-cli.log"
tail -n 30 $OUT/compiled-cli.log | tee -a $log
step tests 150 bash -c "python3 -m pytest tests/gpu/test_compile_ahead_gpu.py tests/gpu/test_timers_gpu.py::test_run_attn_end_to_end_on_gpu -x -q -p no:cacheprovider > $OUT/tests.log 2>&1"
tail -n 80 $OUT/tests.log | tee -a $log
