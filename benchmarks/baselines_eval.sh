#!/bin/sh
# Compares the six planners on one fixed sample with the embedded 1.5B model
# (Qwen2.5-Coder-1.5B, greedy), each with its Table IV (static) or Table II (--dynamic) config.
# Ordered split by split, every planner on a split before the next split, so a run stopped early
# still compares all planners on the same tasks. Resumable: rerun the same command.
#
#   benchmarks/baselines_eval.sh runs/bl static          # Table IV (static environment)
#   benchmarks/baselines_eval.sh runs/bl dynamic 0       # Table II (dynamic, seed 0)
#   lookplangraph report runs/bl_static_* --per-split
#
# PLANNERS="llm-as-p react" restricts the planners (sg-rwr may be added: configs/table*_sg_rwr.toml);
# SPLITS="behavior" the splits; VH="..." and BH="..." replace the task lists, OFFICE="office-01 ..."
# the office tasks (default: all 29).
# SG-RwR: static mode runs configs/table4_sg_rwr.toml; SGRWR_STEP=1 runs its step mode there instead
# (configs/table4_sg_rwr_step.toml, run directory *_static_sg-rwr-step_*); the dynamic config is
# step mode already. SGRWR_ROUNDS=N replaces the config's [sg_rwr] max_rounds (a copy of the config is
# written beside the run directory).
# LookPlanGraph runs with --max-actions 12 (as benchmarks/lm_eval.sh), the baselines with the
# limits of their configs. Hours of CPU on 2 cores.
set -e
# Back to back, each run would see the previous one's load average and take 1 llama.cpp thread:
# use every CPU unless LOOKPLANGRAPH_THREADS says otherwise.
export LOOKPLANGRAPH_THREADS=${LOOKPLANGRAPH_THREADS:-$(nproc)}
OUT=${1:?usage: benchmarks/baselines_eval.sh OUT_PREFIX static|dynamic [SEED]}
MODE=${2:?static or dynamic}
SEED=${3:-0}
VH=${VH:-"file120_1 file27_2 file331_2 file392_1 file432_1 file44_1 file463_2 file487_1 file647_2 file650_1 file705_1 file773_1"}
BH=${BH:-"buy_a_belt lighting_fireplace packing_recreational_vehicle_for_trip picking_up_trash putting_backpack_in_car_for_school putting_out_condiments"}
L=${LOOKPLANGRAPH:-.venv/bin/lookplangraph}
PLANNERS=${PLANNERS:-"llm-as-p llm+p sayplan-lite sayplan react lookplangraph"}
SPLITS=${SPLITS:-"behavior virtualhome office"}
if [ "$MODE" = dynamic ]; then TABLE=table2; EXTRA="--dynamic --dynamic-seed $SEED"; TAG="dynamic$SEED"; else TABLE=table4; EXTRA=""; TAG=static; fi
for split in $SPLITS; do
  case $split in
    behavior) TASKS="--task $BH";;
    virtualhome) TASKS="--task $VH";;
    office) TASKS=${OFFICE:+--task $OFFICE};;
  esac
  for p in $PLANNERS; do
    case $p in
      lookplangraph) if [ $TABLE = table4 ]; then CFG=configs/table4_planning.toml; else CFG=configs/table2_dynamic.toml; fi
                     LIMIT="--max-actions 12";;
      *) CFG=configs/${TABLE}_$(echo $p | sed 's/llm+p/llm_plus_p/; s/-/_/g').toml; LIMIT="";;
    esac
    NAME=$(echo $p | sed 's/+/_plus_/')
    if [ $p = sg-rwr ]; then
      if [ -n "$SGRWR_STEP" ] && [ $TABLE = table4 ]; then CFG=configs/table4_sg_rwr_step.toml; NAME=sg-rwr-step; fi
      if [ -n "$SGRWR_ROUNDS" ]; then
        sed "s/^max_rounds = .*/max_rounds = $SGRWR_ROUNDS/" $CFG > "${OUT}_${TAG}_${NAME}_$split.toml"
        CFG="${OUT}_${TAG}_${NAME}_$split.toml"
      fi
    fi
    # shellcheck disable=SC2086
    $L eval --config $CFG --planner $p --split $split $TASKS $EXTRA $LIMIT --cache --out "${OUT}_${TAG}_${NAME}_$split"
  done
done
