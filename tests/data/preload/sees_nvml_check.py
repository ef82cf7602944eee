"""Imported by tests/unit/test_preload.py through solbench.measure.preload.preload: records the environment
variable torch.cuda.is_available() consults, as it stood during the import."""

import os

SEEN = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
