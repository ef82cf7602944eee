"""The overlapped GEMM + all-reduce (workloads/collectives.yaml) refuses a chunk count below 1 by name,
before any collective (chunks=0 was a ZeroDivisionError; a negative count skipped every chunk)."""

import pytest
import torch

from solbench.impls import collectives


@pytest.mark.parametrize("chunks", [0, -1])
@pytest.mark.parametrize("call", [
    lambda x, w, chunks: collectives.gemm_allreduce_overlapped(x, w, chunks),
    lambda x, w, chunks: collectives.gemm_chunks(x, w, chunks),
    lambda x, w, chunks: collectives.allreduce_chunks(torch.zeros(8, 4), chunks),
])
def test_a_chunk_count_below_one_is_a_value_error_naming_chunks(call, chunks):
    x, w = torch.randn(8, 4), torch.randn(4, 4)
    with pytest.raises(ValueError, match=rf"^chunks must be at least 1, got {chunks}$"):
        call(x, w, chunks)
