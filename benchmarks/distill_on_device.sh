#!/bin/bash
# The GPU side of distillation, for a lent machine that receives at most 64 MiB per call (see
# benchmarks/distill_carry.sh, which prepares runs/carry/ here). Three verbs, one per kind of call:
#
#   benchmarks/distill_on_device.sh probe            # python, torch, CUDA, what lookplangraph's import lacks
#   benchmarks/distill_on_device.sh stash            # move the carried chunks/data/wheels to /tmp/carry
#                                                    #   (one call per base chunk, back to back: the machine
#                                                    #   stays warm ~30 s and keeps /tmp between calls)
#   benchmarks/distill_on_device.sh train MINUTES [TRAIN ARGS...]
#                                                    # join the base (SHA-256 checked), train (from the
#                                                    #   carried init/adapter.gguf if there is one) with a time
#                                                    #   schedule of MINUTES, and put the adapter (in <=15 MiB
#                                                    #   chunks), train.json, loss.csv and loss.png in $OUT;
#                                                    #   a run the NaN guard stops goes on once with
#                                                    #   --attention eager for the time left
#
# Then here: lookplangraph distill join FILES_AT/adapter.gguf.manifest.json --out runs/lora15/adapter.gguf
set -euo pipefail
verb=${1:?probe, stash or train}
shift
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:.
CARRY=/tmp/carry
case "$verb" in
probe)
  python3 -V; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
  grep -o -m1 'amx_int8' /proc/cpuinfo || echo "no amx"
  python3 - <<'EOF'
import importlib
for name in ("torch", "transformers", "peft", "accelerate", "gguf", "pydantic", "safetensors", "matplotlib",
             "tqdm", "numpy", "yaml", "networkx", "jinja2", "rich", "sentencepiece", "tokenizers"):
    try:
        m = importlib.import_module(name)
        print(f"{name} {getattr(m, '__version__', '?')}")
    except Exception as exc:
        print(f"{name} MISSING ({type(exc).__name__}: {exc})")
import torch
print("cuda", torch.cuda.is_available(), torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
for mod in ("lookplangraph.distill.training.sft", "lookplangraph.cli"):
    try:
        importlib.import_module(mod)
        print("import ok:", mod)
    except Exception as exc:
        print(f"import FAILED: {mod}: {type(exc).__name__}: {exc}")
EOF
  ;;
stash)
  mkdir -p "$CARRY/base"
  for f in runs/carry/base/*; do [ -e "$f" ] && mv -f "$f" "$CARRY/base/"; done
  for d in data wheels init; do [ -d runs/carry/$d ] && { rm -rf "$CARRY/$d"; mv runs/carry/$d "$CARRY/$d"; }; done
  ls "$CARRY/base" | wc -l; du -sh "$CARRY"
  ;;
train)
  minutes=${1:?minutes}
  shift
  if ls "$CARRY"/wheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$CARRY"/wheels/*.whl
  fi
  python3 -m lookplangraph.cli distill join "$CARRY"/base/*.manifest.json --out /tmp/base.gguf
  init=()
  [ -f "$CARRY/init/adapter.gguf" ] && init=(--init-adapter "$CARRY/init/adapter.gguf")
  run_train() {  # MINUTES [MORE TRAIN ARGS...]
    local m=$1
    shift
    python3 -m lookplangraph.cli distill train --data "$CARRY/data/sft.jsonl.gz" --base /tmp/base.gguf --out /tmp/lora \
      --system-prompt compact --max-minutes "$m" --lr-schedule time --max-steps 1000000 "${init[@]}" "$@" 2>&1 \
      | tr '\r' '\n' | grep -v -E '^\s*$' | awk 'NR % 20 == 1 || /loss|examples|written|done|stopped|Error|error/' \
      | tee -a "$OUT/train.log"
  }
  started=$SECONDS
  if ! run_train "$minutes" "$@"; then
    # A run the NaN guard stopped (its weights are still finite): go on from its last checkpoint
    # with plain attention kernels for the time left, once.
    grep -q "training diverged" "$OUT/train.log" || exit 1
    left=$(python3 -c "print(round($minutes - ($SECONDS - $started) / 60 - 1.5, 1))")
    python3 -c "import sys; sys.exit(0 if $left > 0.5 else 1)" || { echo "no time left to retry" >&2; exit 1; }
    echo "diverged: going on with --attention eager for $left minutes" | tee -a "$OUT/train.log"
    run_train "$left" "$@" --attention eager
  fi
  python3 -m lookplangraph.cli distill split /tmp/lora/adapter.gguf --out "$OUT" --chunk-mib 15
  cp /tmp/lora/train.json /tmp/lora/loss.csv "$OUT"/
  cp /tmp/lora/loss.png "$OUT"/ 2>/dev/null || true
  ls -la "$OUT"
  ;;
*) echo "unknown verb $verb" >&2; exit 2 ;;
esac
