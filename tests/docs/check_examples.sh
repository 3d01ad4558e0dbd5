#!/usr/bin/env bash
# Checks every example in the language reference (docs/language.md):
#   ```tfm        a complete program; `tfmc check` must accept it (exit 0)
#   ```tfm-error  a program with a mistake; its first line is
#                   # expect: L:C: error: message
#                 (L:C within the block); `tfmc check` must exit 1 and the
#                 first "error:" line it prints must be exactly
#                 FILE:L:C: error: message. An expectation that does not start
#                 with a digit (e.g. "<command line>:1:6: error: ...") is
#                 compared as written. "EXAMPLE.tfm" in the expectation
#                 stands for the example's own file name.
#   ```sh         each line that starts with "tfmc check " is run from the
#                 repository root (with this tfmc) and must exit 0.
# Either kind of tfm block may carry "# args: ARGS" among its first three
# lines: extra arguments for tfmc check (-D, --variant).
# Each block is written to its own file, named by the doc line of its
# opening fence (example_L123.tfm). Prints one line per example, then
# "N passed, M failed"; exits 1 if any failed.
# usage: check_examples.sh TFMC DOC.md
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 TFMC DOC.md" >&2
  exit 2
fi
tfmc=$1 doc=$2
[ -x "$tfmc" ] || { echo "not an executable: $tfmc" >&2; exit 2; }
[ -f "$doc" ] || { echo "no such file: $doc" >&2; exit 2; }
case $tfmc in /*) ;; *) tfmc=$PWD/$tfmc ;; esac
root=$(cd "$(dirname "$doc")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tfm-doc-examples.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# Split the doc into one file per fenced block; the index lists "KIND LINE".
LC_ALL=C awk -v dir="$work" '
  other && /^```[ \t]*$/ { other = 0; next }
  other { next }
  inside && /^```[ \t]*$/ { inside = 0; close(file); next }
  inside { print > file; next }
  /^```(tfm|tfm-error|sh)[ \t]*$/ {
    kind = $0; sub(/^```/, "", kind); sub(/[ \t]*$/, "", kind)
    inside = 1
    file = dir "/example_L" NR (kind == "sh" ? ".sh" : ".tfm")
    printf "" > file
    print kind, NR > (dir "/index")
    next
  }
  /^```/ { other = 1; next }
  END { if (inside) { print "unterminated block at end of file" > "/dev/stderr"; exit 1 } }
' "$doc" || exit 2
[ -f "$work/index" ] || { echo "0 passed, 0 failed (no examples found in $doc)"; exit 1; }

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok    $1"; }
bad() { fail=$((fail + 1)); echo "FAIL  $1"; shift; for l in "$@"; do echo "      $l"; done; }

args_of() { head -n 3 "$1" | LC_ALL=C sed -n 's/^# args: //p' | head -n 1; }

while read -r kind line; do
  what="docs line $line ($kind)"
  case $kind in
    tfm)
      name=example_L$line.tfm
      args=$(args_of "$work/$name")
      # shellcheck disable=SC2086  # args are split on purpose
      err=$(cd "$work" && timeout 60 "$tfmc" check "$name" $args 2>&1 >/dev/null)
      status=$?
      if [ "$status" -eq 0 ]; then ok "$what"
      else bad "$what" "tfmc check $name $args: exit $status, expected 0" \
               "$(printf '%s\n' "$err" | head -n 3)"
      fi
      ;;
    tfm-error)
      name=example_L$line.tfm
      args=$(args_of "$work/$name")
      want=$(head -n 1 "$work/$name" | LC_ALL=C sed -n 's/^# expect: //p')
      if [ -z "$want" ]; then
        bad "$what" "the first line must be '# expect: L:C: error: message'"
        continue
      fi
      want=${want//EXAMPLE.tfm/$name}
      case $want in [0-9]*) want="$name:$want" ;; esac
      # shellcheck disable=SC2086
      err=$(cd "$work" && timeout 60 "$tfmc" check "$name" $args 2>&1 >/dev/null)
      status=$?
      first=$(printf '%s\n' "$err" | LC_ALL=C grep -a -m 1 -E '(^|: )error: ')
      if [ "$status" -ne 1 ]; then
        bad "$what" "tfmc check $name $args: exit $status, expected 1" "first error: $first"
      elif [ "$first" != "$want" ]; then
        bad "$what" "expected: $want" "got:      $first"
      else ok "$what"
      fi
      ;;
    sh)
      n=0
      while IFS= read -r cmd; do
        case $cmd in "tfmc check "*) ;; *) continue ;; esac
        n=$((n + 1))
        # shellcheck disable=SC2317  # tfmc is called by the eval'd line
        err=$(cd "$root" && tfmc() { timeout 60 "$tfmc" "$@"; } && eval "$cmd" 2>&1 >/dev/null)
        status=$?
        if [ "$status" -eq 0 ]; then ok "docs line $line (sh): $cmd"
        else bad "docs line $line (sh): $cmd" "exit $status, expected 0" \
                 "$(printf '%s\n' "$err" | head -n 3)"
        fi
      done < "$work/example_L$line.sh"
      ;;
  esac
done < "$work/index"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
