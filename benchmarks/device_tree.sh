#!/bin/sh
# The working tree travels with every device call and counts toward its 64 MiB (docs/guides/
# distillation.md): a 58.5 MiB chunk leaves ~5.5 MiB for the tree. This script takes the tracked
# files the device never needs out of the tree git shows (the shipped adapters and any committed
# .gguf, the committed training data, the figures) and puts them back afterwards. The files stay
# on disk; only the index and .git/info/exclude change, so commit nothing in between.
#
#   sh benchmarks/device_tree.sh size       # the tree a call carries now, and what untrack would leave
#   sh benchmarks/device_tree.sh untrack    # before the device calls (refused while something is untracked)
#   sh benchmarks/device_tree.sh restore    # after them
set -e
PATTERNS="*.gguf data/training/*.jsonl.gz docs/figures/*.png"
LIST=.git/info/device-untracked
MARK="# device_tree.sh"
tree_bytes() { git ls-files -z | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1; }
case "$1" in
  size)
    total=$(tree_bytes)
    heavy=$(git ls-files -z -- $PATTERNS | xargs -0 -r du -cb | tail -1 | cut -f1)
    echo "tracked tree: $total bytes; after untrack: $((total - ${heavy:-0})) bytes (room beside a 58.5 MiB chunk: $((64 * 1048576 - 61341696)) bytes)";;
  untrack)
    [ -s "$LIST" ] && { echo "already untracked ($LIST): run restore first" >&2; exit 1; }
    mkdir -p .git/info
    git ls-files -- $PATTERNS > "$LIST"
    [ -s "$LIST" ] || { echo "nothing to untrack" >&2; rm -f "$LIST"; exit 0; }
    git rm -q --cached --pathspec-from-file="$LIST"
    { echo "$MARK begin"; cat "$LIST"; echo "$MARK end"; } >> .git/info/exclude
    echo "untracked $(wc -l < "$LIST") files; tree now $(tree_bytes) bytes; restore with: sh $0 restore";;
  restore)
    [ -s "$LIST" ] || { echo "nothing to restore ($LIST is missing)" >&2; exit 1; }
    git reset -q HEAD --pathspec-from-file="$LIST"
    sed -i "/^$MARK begin\$/,/^$MARK end\$/d" .git/info/exclude
    rm -f "$LIST"
    echo "restored; git status shows no change: $(git status --short | wc -l) lines";;
  *) echo "usage: sh $0 size|untrack|restore" >&2; exit 2;;
esac
