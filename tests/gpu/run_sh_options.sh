#!/usr/bin/env bash
# tests/gpu/run.sh without a GPU: "no GPU" and status 0 (issue check 4);
# a bad option, a missing value, a --prebuilt folder without a build or a
# --wheels folder that is not there:
# status 2 and a line that says which.
# usage: run_sh_options.sh RUN_SH
set -u
run=$1
fail=0
expect() { # STATUS TEXT ARGS...: the status and a line containing TEXT
  local status=$1 text=$2 out got
  shift 2
  out=$("$run" "$@" 2>&1)
  got=$?
  if [ "$got" -eq "$status" ] && printf '%s\n' "$out" | grep -qF -- "$text"; then
    echo "ok: run.sh $*: $(printf '%s' "$out" | tail -1)"
  else
    echo "FAIL: run.sh $*: status $got, output: $out"
    fail=1
  fi
}
if ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 '; then
  echo "a CUDA driver is installed: the no-GPU answer is not checked here"
else
  expect 0 "no GPU"
fi
expect 2 "unknown option '--bogus'" --bogus x
expect 2 "--gpu-arch needs a value" --gpu-arch
expect 2 "no build there" --prebuilt /nonexistent
expect 2 "--wheels /nonexistent: no such folder" --wheels /nonexistent
exit $fail
