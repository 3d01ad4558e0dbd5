#!/usr/bin/env bash
# --profile (issue #5): two training steps print, for the train graph, one
# row per kernel (each called once per step) and a total line, and the
# kernels' times add up to most of the graph's run time (the rest is the
# calls between them), never to more.
# usage: profile.sh BINARY CORPUS WORKDIR
set -eu
bin=$1 corpus=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$bin" --help | grep -q -- "--profile"
"$bin" train --data "$corpus" --steps 2 --profile > "$work/log" 2> "$work/profile"
cat "$work/profile"
# The train graph's table: from its header to its total line.
awk '/^profile: train graph/ { on = 1; next } on' "$work/profile" > "$work/train"
awk '
  $1 ~ /^[0-9]+$/ { rows++; sum += $3; if ($2 != 2) { print "FAIL: kernel " $1 " called " $2 " times"; failed = 1; exit 1 } }
  $1 == "total" { total = $3; runs = $2; exit }
  END {
    if (failed) exit 1
    if (rows < 10) { print "FAIL: " rows " kernel rows"; exit 1 }
    if (runs != 2 || total <= 0) { print "FAIL: total line: " runs " runs, " total " ms"; exit 1 }
    if (sum > total * 1.001 + 0.001 || sum < total * 0.5) {
      print "FAIL: kernels sum to " sum " ms of a " total " ms total"; exit 1
    }
    printf "ok: %d kernels, %.3f of %.3f ms\n", rows, sum, total
  }' "$work/train"
