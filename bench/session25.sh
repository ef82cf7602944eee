#!/usr/bin/env bash
# The twenty-fifth session's H200 calls: bench/session26.sh's parts with `--launch graph` added to every `run` and
# `ab`, named and writing files with a g (gfive, gfive-1.json, ...). PARTS default "gtests gfive"; gtests is
# session26's ltests, which now also runs the forger, isolation and CUPTI GPU tests. Carry .whl.
PARTS=$(echo "${PARTS:-gtests gfive}" | sed -E 's/(^| )gtests( |$)/\1gltests\2/g') P=g EXTRA="--launch graph" \
  exec bash bench/session26.sh
