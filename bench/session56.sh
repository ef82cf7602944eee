#!/usr/bin/env bash
# The fifty-sixth session's second call: on an H200, issue 16's five o_proj runs and five gated runs against a
# six-round base, and issue 20's CUPTI floor; on any other card, the same-machine A/B of o_proj's wall time
# between this tree and OLD (scratch_gpu/7712eb6, carried). LIMIT as in bench/session26.sh.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  PARTS="five gated cfloor" GATED=5 BASE_REPEAT=6 bash bench/session26.sh
else
  OLD=${OLD:-scratch_gpu/7712eb6} PARTS="treeab" bash bench/session26.sh
fi
