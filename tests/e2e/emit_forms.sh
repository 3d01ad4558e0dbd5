#!/usr/bin/env bash
# Every form of tfmc emit works on a small model and shows what it should.
# usage: emit_forms.sh TFMC MODELS_DIR
set -eu
tfmc=$1 models=$2
small=(-D vocab=13 -D d_model=8 -D heads=2 -D layers=1 -D seq_len=4 -D batch=2)
expect() { # form pattern [extra args]
  local form=$1 pattern=$2
  shift 2
  if "$tfmc" emit "$form" "$models/gpt.tfm" "${small[@]}" "$@" | grep -q -- "$pattern"; then
    echo "ok: emit $form $* shows '$pattern'"
  else
    echo "FAIL: emit $form $* does not show '$pattern'"
    exit 1
  fi
}
expect ast "model gpt"
expect graph 'output "loss"'
expect graph 'update %' --train
expect graph 'param "wte.table"' --no-opt
expect dot "digraph tfm"
expect kernels "^kernel 0 "
expect kernels "^buffer " --train
expect llvm "define void @tfm_model_run"
expect asm "tfm_model_run:" --cpu x86-64-v3
