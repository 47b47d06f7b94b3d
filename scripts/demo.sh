#!/usr/bin/env bash
# Runs `wrench run` on the example Go module with its scripted fix, then on
# the Python example, and shows that the patch makes the tests pass.
set -euo pipefail
bin=${1:-bin/wrench}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each example becomes a fresh git repository, as a user's would be.
mkrepo() {
  cp -r "$root/examples/$1" "$work/$1"
  git -C "$work/$1" init -q -b main
  git -C "$work/$1" add -A
  git -C "$work/$1" -c user.name=demo -c user.email=demo@example.com commit -qm "initial"
}

run() { # name test-command instruction
  mkrepo "$1"
  echo "== wrench run on examples/$1"
  "$bin" run --repo "$work/$1" --model "scripted:$root/examples/$1/fix.yaml" \
    --test "$2" --task "$3" --out "$work/$1.patch" --data-dir "$work/data"
  echo "== patch"
  cat "$work/$1.patch"
}

run go-calc "go test ./..." "The tests fail: Add subtracts and Mean panics or returns NaN on an empty slice. Fix calc.go."
run py-textstats "python3 -m pytest -q" "word_count miscounts text with extra spaces or no words. Fix it."
echo "== both examples resolved"
