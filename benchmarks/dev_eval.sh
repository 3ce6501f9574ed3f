#!/bin/sh
# The dev set's measurement (grasif/dev.py: two hand-written buildings, 32 tasks): where choices are
# made. Same settings as benchmarks/lm_eval.sh (greedy, --max-actions 12); writes OUT_PREFIX_dev,
# which benchmarks/lm_eval_table.py shows apart from the test sample. Resumable.
#
#   benchmarks/dev_eval.sh runs/lm_eval                   # today's defaults, beside runs/lm_eval_{vh,bh,office}
#   benchmarks/dev_eval.sh runs/dev_typed --vocabulary typed
#   benchmarks/dev_eval.sh runs/s_half --task $(grep -v '^#' benchmarks/dev_half.txt) \
#       --lm llamacpp:qwen2.5-coder-1.5b+ADAPTER [--dynamic --dynamic-seed 0 --dynamic-mode paper]
#                                                         # the fixed half: a quick look (it can hide a loss)
#   .venv/bin/python benchmarks/lm_eval_table.py runs/lm_eval runs/dev_typed --compare
set -e
export LOOKPLANGRAPH_THREADS=${LOOKPLANGRAPH_THREADS:-$(nproc)}
OUT=${1:?usage: benchmarks/dev_eval.sh OUT_PREFIX [extra lookplangraph eval flags]}
shift
L=${LOOKPLANGRAPH:-.venv/bin/lookplangraph}
$L eval --split dev --max-actions 12 --out "${OUT}_dev" "$@"
