#!/usr/bin/env bash
# The fifty-sixth session's calls: on an H200, H200_PARTS (default: issue 16's five o_proj runs and five gated
# runs against a six-round base, and issue 20's CUPTI floor); on any other card, OTHER_PARTS (default: the
# same-machine A/B of o_proj's wall time between this tree and OLD, scratch_gpu/7712eb6, carried).
# LIMIT and the parts' own settings as in bench/session26.sh.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  PARTS="${H200_PARTS:-five gated cfloor}" GATED=${GATED:-5} BASE_REPEAT=${BASE_REPEAT:-6} bash bench/session26.sh
else
  OLD=${OLD:-scratch_gpu/7712eb6} PARTS="${OTHER_PARTS:-treeab}" bash bench/session26.sh
fi
