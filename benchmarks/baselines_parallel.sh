#!/bin/sh
# benchmarks/baselines_eval.sh with every (planner, split) as its own process, JOBS at a time: for a
# machine with a GPU (or many cores). Same run directories as baselines_eval.sh, so the same
# tables read them, and resumable the same way (rerun the same command).
#
# With a GPU, build llama-cpp-python with CUDA and offload every layer; e.g. on one H100 (16 CPUs):
#   CMAKE_ARGS="-DGGML_CUDA=on" pip install --no-binary llama-cpp-python llama-cpp-python==0.3.36
#   LOOKPLANGRAPH_GPU_LAYERS=-1 JOBS=16 benchmarks/baselines_parallel.sh runs/gpu static
#   .venv/bin/python benchmarks/baselines_table.py runs/gpu static --own
#
# PLANNERS, SPLITS, VH and BH as in baselines_eval.sh (PLANNERS may add sg-rwr). Each job's log
# is OUT_PREFIX_TAG_PLANNER_SPLIT.log. Office jobs (29 tasks) go first: they take longest.
set -e
OUT=${1:?usage: benchmarks/baselines_parallel.sh OUT_PREFIX static|dynamic [SEED]}
MODE=${2:?static or dynamic}
SEED=${3:-0}
JOBS=${JOBS:-4}
PLANNERS=${PLANNERS:-"llm-as-p llm+p sayplan-lite sayplan react lookplangraph"}
SPLITS=${SPLITS:-"office virtualhome behavior"}
# Processes share the machine: with every layer on the GPU, llama.cpp needs few CPU threads each.
export LOOKPLANGRAPH_THREADS=${LOOKPLANGRAPH_THREADS:-2}
if [ "$MODE" = dynamic ]; then TAG="dynamic$SEED"; else TAG=static; fi
HERE=$(cd "$(dirname "$0")" && pwd)
export OUT MODE SEED TAG HERE
mkdir -p "$(dirname "$OUT")"
for s in $SPLITS; do for p in $PLANNERS; do echo "$p $s"; done; done |
  xargs -P "$JOBS" -L 1 sh -c 'PLANNERS=$0 SPLITS=$1 sh "$HERE/baselines_eval.sh" "$OUT" "$MODE" "$SEED" \
      > "${OUT}_${TAG}_$(echo $0 | sed "s/+/_plus_/")_$1.log" 2>&1 && echo "done: $0 $1" || echo "FAILED: $0 $1 (see its log)"'
