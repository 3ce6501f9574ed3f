#!/bin/sh
# The issue-4 measurement: Qwen2.5-Coder-1.5B (embedded default), 12 VirtualHome + 6 BEHAVIOR
# tasks (seeded sample, see the closing note), typed vocabulary, SGS correction on and off.
# Hours of CPU on 2 cores; resumable: rerun to continue. Compare: lookplangraph report runs/lm18_*
VH="file120_1 file27_2 file331_2 file392_1 file432_1 file44_1 file463_2 file487_1 file647_2 file650_1 file705_1 file773_1"
BH="buy_a_belt lighting_fireplace packing_recreational_vehicle_for_trip picking_up_trash putting_backpack_in_car_for_school putting_out_condiments"
L=.venv/bin/lookplangraph
$L eval --split virtualhome --tasks $VH --max-actions 12 --out runs/lm18_vh_correction > runs/lm18_vh_correction.log 2>&1
$L eval --split behavior --tasks $BH --max-actions 12 --out runs/lm18_bh_correction > runs/lm18_bh_correction.log 2>&1
$L eval --split virtualhome --tasks $VH --max-actions 12 --no-correction --out runs/lm18_vh_nocorrection > runs/lm18_vh_nocorrection.log 2>&1
$L eval --split behavior --tasks $BH --max-actions 12 --no-correction --out runs/lm18_bh_nocorrection > runs/lm18_bh_nocorrection.log 2>&1
