#!/bin/sh
# Prepares runs/carry/ for LoRA training on a lent GPU machine that receives at most 64 MiB per
# call (the repository's ~4.4 MB included) and has torch, transformers, peft and accelerate but not
# gguf or pydantic (Python 3.12):
#   runs/carry/base/   the base GGUF in 58.5 MiB chunks with a SHA-256 manifest (19 for the 1.5B)
#   runs/carry/data/   sft.jsonl.gz and counts.json (data v2's 38,966 examples, 201 MB, gzip to ~3 MB)
#   runs/carry/wheels/ gguf and pydantic wheels for Python 3.12
#   runs/carry/init/   with INIT: the adapter the run starts from (adapter.gguf, 37 MB: a call of its own)
#
#   benchmarks/distill_carry.sh [MODEL] [DATA_DIR] [INIT]   # default qwen2.5-coder-1.5b runs/distill, a fresh LoRA
#   (INIT: a GGUF LoRA file or the name of an adapter shipped for MODEL, e.g. lpg-v2)
#   (DATA_DIR holds sft.jsonl, or sft.jsonl.gz as the committed sets of data/training/ do)
#
# Then, on the machine: benchmarks/distill_on_device.sh (probe, stash one chunk per call, train);
# docs/guides/distillation.md gives the calls and what they cost.
set -e
MODEL=${1:-qwen2.5-coder-1.5b}
DATA=${2:-runs/distill}
PY=${PYTHON:-.venv/bin/python}
INIT=${3:-}
OUT=runs/carry
[ -f "$DATA/sft.jsonl" ] || [ -f "$DATA/sft.jsonl.gz" ] || {
  echo "no $DATA/sft.jsonl or sft.jsonl.gz: run lookplangraph distill data --out $DATA" >&2; exit 1; }
if [ -n "$INIT" ]; then   # checked before anything of an earlier carry is removed
  INIT_FILE=$($PY - "$MODEL" "$INIT" <<'EOF'
import sys
from lookplangraph.lm.llamacpp import resolve_adapter
from lookplangraph.lm.lora import AdapterError
try:
    print(resolve_adapter(sys.argv[1], sys.argv[2]))
except AdapterError as exc:
    sys.exit(f"INIT {sys.argv[2]}: {exc}")
EOF
) || exit 1
fi
rm -rf "$OUT" && mkdir -p "$OUT/data" "$OUT/wheels"
[ -n "$INIT" ] && mkdir -p "$OUT/init" && cp "$INIT_FILE" "$OUT/init/adapter.gguf"
if [ -f "$DATA/sft.jsonl" ]; then gzip -c "$DATA/sft.jsonl" > "$OUT/data/sft.jsonl.gz"
else cp "$DATA/sft.jsonl.gz" "$OUT/data/"; fi   # a committed set (data/training/)
# counts.json records the data's prompt layout and answer format; training writes them into the
# adapter, and without it the adapter would claim the v0 format (scene-history, action+reason).
[ -f "$DATA/counts.json" ] && cp "$DATA/counts.json" "$OUT/data/"
BASE=$($PY -c "from lookplangraph.lm.embedded import ensure_model; print(ensure_model('$MODEL'))")
$PY -m lookplangraph.cli distill split "$BASE" --out "$OUT/base" --chunk-mib 58.5
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$OUT/wheels" gguf==0.19.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
du -sh "$OUT"/*
