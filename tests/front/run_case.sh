#!/usr/bin/env bash
# Runs one malformed program through `tfmc check` and compares what it
# prints with the expectations written in the case (or in CASE.expect):
#   # args: -D d_model=abc          extra command-line arguments
#   # status: 1                     expected exit status (default 1)
#   # expect: 4:11: error: unknown name 'foo'
#   # expect-re: ^huge\.tfm:[0-9]+:[0-9]+: error: program is nested too deeply
#   # errors: any                   do not require the error count to match
# An `expect:` line that starts with a digit is prefixed with "CASE.tfm:"; it
# must match the start of a line of stderr. Every "error:" line printed must
# be expected (unless "errors: any"), so no cascade goes unnoticed. Paths into
# the bundled models/ folder are shown as <models>/.
# usage: run_case.sh TFMC CASE.tfm MODELS_DIR
set -u
tfmc=$1 case=$2 models=${3:-/nonexistent}
dir=$(dirname "$case") name=$(basename "$case")
spec=$case
[ -f "$case.expect" ] && spec=$case.expect
directive() { LC_ALL=C grep -a "^# $1: " "$spec" | sed "s/^# $1: //"; }

args=$(directive args)
want_status=$(directive status)
want_status=${want_status:-1}
cd "$dir" || exit 1
# shellcheck disable=SC2086  # args are split on purpose
err=$(timeout 30 "$tfmc" check "$name" $args 2>&1 >/dev/null)
status=$?
err=${err//"$models/"/<models>/}
fail=0
# A sanitizer build exits 1 on a report, like a program with errors: look for it.
if printf '%s\n' "$err" | LC_ALL=C grep -aqE 'Sanitizer|runtime error:'; then
  echo "FAIL: sanitizer report"
  fail=1
fi
if [ "$status" -ne "$want_status" ]; then
  echo "FAIL: exit status $status, expected $want_status"
  [ "$status" -ge 124 ] && echo "(timeout or crash)"
  fail=1
fi
nerr_expected=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  case $line in [0-9]*) line="$name:$line" ;; esac
  case $line in *": error: "*|"tfmc: error: "*) nerr_expected=$((nerr_expected + 1)) ;; esac
  if ! printf '%s\n' "$err" | LC_ALL=C grep -aqF -- "$line"; then
    echo "FAIL: missing: $line"
    fail=1
  elif ! printf '%s\n' "$err" | LC_ALL=C grep -a -- "$line" | LC_ALL=C grep -aqF -x -- "$line" &&
       ! printf '%s\n' "$err" | LC_ALL=C awk -v p="$line" 'index($0, p) == 1 { found = 1 } END { exit !found }'; then
    echo "FAIL: not at the start of a line: $line"
    fail=1
  fi
done <<< "$(directive expect)"
while IFS= read -r re; do
  [ -z "$re" ] && continue
  nerr_expected=$((nerr_expected + 1))
  if ! printf '%s\n' "$err" | LC_ALL=C grep -aqE -- "$re"; then
    echo "FAIL: no line matches: $re"
    fail=1
  fi
done <<< "$(directive expect-re)"
if [ "$(directive errors)" != "any" ]; then
  nerr=$(printf '%s\n' "$err" | LC_ALL=C grep -acE '^[^ ].*: error: ')
  if [ "$nerr" -ne "$nerr_expected" ]; then
    echo "FAIL: $nerr errors printed, $nerr_expected expected"
    fail=1
  fi
fi
if [ "$fail" -ne 0 ]; then
  echo "--- tfmc check $name $args printed:"
  printf '%s\n' "$err" | head -60
fi
exit "$fail"
