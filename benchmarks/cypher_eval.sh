#!/usr/bin/env bash
# The Cypher agent against its two baselines with one LM, in growing rounds (every run resumes,
# so each round only adds items): QA and grounding, agentic / one-query / whole-graph.
#
#   LM=llamacpp:qwen2.5-coder-1.5b OUT=runs/cypher_1.5b DEADLINE=$(date -d 21:15 +%s) bash benchmarks/cypher_eval.sh
#
# One process at a time. DEADLINE (epoch seconds, optional): no run starts after it and a running
# one is stopped at it (the item in progress is lost, finished ones are kept). Then:
#   for d in $OUT/*/; do cat $d/summary.json; done
set -u
OUT=${OUT:-runs/cypher_eval}
LM=${LM:-llamacpp:qwen2.5-coder-1.5b}
ROUNDS=${ROUNDS:-"qa:2 grounding:1 qa:4 grounding:2 qa:10 grounding:5"}
PY=${PY:-.venv/bin/python}
for round in $ROUNDS; do
  task=${round%%:*}; limit=${round##*:}
  for variant in agentic one-query whole-graph; do
    budget=""
    if [ -n "${DEADLINE:-}" ]; then
      left=$(( DEADLINE - $(date +%s) ))
      [ "$left" -le 0 ] && { echo "deadline reached"; exit 0; }
      budget="timeout $left"
    fi
    echo "== $task $variant limit $limit ($(date +%T))"
    $budget $PY -m lookplangraph.cypher.commands cypher-eval --benchmark "$task" --variant "$variant" --limit "$limit" \
      --lm "$LM" --out "$OUT/${task}_${variant}" --cache
  done
done
