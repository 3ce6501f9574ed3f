#!/bin/sh
# Evaluates the embedded model (Qwen2.5-Coder-1.5B, the default; greedy, --max-actions 12) on the
# 47-task evaluation sample: 12 VirtualHome tasks (a seeded sample of the strict selection, all with
# changing goals), 6 BEHAVIOR tasks and the 29 office tasks, into OUT_PREFIX_vh, _bh and _office;
# extra arguments go to every lookplangraph eval. Hours of CPU on 2 cores; resumable: rerun the same
# command to continue.
#
#   benchmarks/lm_eval.sh runs/lm_eval                    # today's defaults
#   benchmarks/lm_eval.sh runs/lm_eval_typed --vocabulary typed
#   benchmarks/lm_eval.sh runs/lm_eval_feedback --correction feedback
#
# Then: lookplangraph report runs/lm_eval_* --per-split, or benchmarks/rejudge.py (judges results written
# by older versions under today's goals).
set -e
# Back to back, each run would see the previous one's load average and take 1 llama.cpp thread:
# use every CPU unless LOOKPLANGRAPH_THREADS says otherwise.
export LOOKPLANGRAPH_THREADS=${LOOKPLANGRAPH_THREADS:-$(nproc)}
OUT=${1:?usage: benchmarks/lm_eval.sh OUT_PREFIX [extra lookplangraph eval flags]}
shift
VH="file120_1 file27_2 file331_2 file392_1 file432_1 file44_1 file463_2 file487_1 file647_2 file650_1 file705_1 file773_1"
BH="buy_a_belt lighting_fireplace packing_recreational_vehicle_for_trip picking_up_trash putting_backpack_in_car_for_school putting_out_condiments"
L=${LOOKPLANGRAPH:-.venv/bin/lookplangraph}
$L eval --split virtualhome --task $VH --max-actions 12 --out "${OUT}_vh" "$@"
$L eval --split behavior --task $BH --max-actions 12 --out "${OUT}_bh" "$@"
$L eval --split office --max-actions 12 --out "${OUT}_office" "$@"
