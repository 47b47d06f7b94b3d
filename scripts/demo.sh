#!/usr/bin/env bash
# `make demo`: starts `wrench serve` on a temporary data dir, submits both
# examples with their scripted fixes and follows them to the end, prints
# the patches, and stops the server. `wrench run` is the one-shot path to
# the same result (see the README).
set -euo pipefail
bin=$(cd "$(dirname "${1:-bin/wrench}")" && pwd)/$(basename "${1:-bin/wrench}")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
# Port 0: the server takes a free port of its own and says which; a port
# someone else already listens on is never mistaken for ours.
port=${WRENCH_DEMO_PORT:-0}
server=
serve_pid=
cleanup() {
  if [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Each example becomes a fresh git repository, as a user's would be.
mkrepo() {
  cp -r "$root/examples/$1" "$work/$1"
  git -C "$work/$1" init -q -b main
  git -C "$work/$1" add -A
  git -C "$work/$1" -c user.name=demo -c user.email=demo@example.com commit -qm "initial"
}

# serve_failed explains why our own server is not running, and exits.
serve_failed() {
  cat "$work/serve.log" >&2
  if grep -q "address already in use" "$work/serve.log"; then
    echo "make demo: port $port is already in use (another wrench serve?): stop it, or set WRENCH_DEMO_PORT to a free port (unset, the demo picks one)" >&2
  else
    echo "make demo: wrench serve did not start ($1)" >&2
  fi
  exit 3
}

echo "== wrench serve (data dir $work/data)"
"$bin" serve --data-dir "$work/data" --http "127.0.0.1:$port" --slots 2 --log-level warn \
  > "$work/serve.log" 2>&1 &
serve_pid=$!
# Wait for our server's own "API on http://…" line: the URL is the one it
# listens on, whatever else runs on this machine.
for _ in $(seq 1 300); do
  server=$(sed -n 's|^wrench serve: API on \(http://[^ ]*\).*|\1|p' "$work/serve.log" | head -n 1)
  [ -n "$server" ] && break
  kill -0 "$serve_pid" 2>/dev/null || serve_failed "it exited"
  sleep 0.1
done
[ -n "$server" ] || serve_failed "no API after 30s"
"$bin" list --server "$server" --limit 1 >/dev/null || serve_failed "its API at $server does not answer"
echo "== API at $server"

submit() { # example test-command instruction
  mkrepo "$1"
  id="demo-$1-$$"
  echo "== wrench submit examples/$1 --follow"
  "$bin" submit --server "$server" --id "$id" --repo "$work/$1" --model "scripted:$root/examples/$1/fix.yaml" \
    --test "$2" --task "$3" --follow
  echo "== patch ($id)"
  "$bin" result --server "$server" "$id" --patch "$work/$1.patch" >/dev/null 2>"$work/result.err" || { cat "$work/result.err"; exit 3; }
  cat "$work/$1.patch"
}

submit go-calc "go test ./..." "The tests fail: Add subtracts and Mean returns NaN on an empty slice. Fix calc.go."
submit py-textstats "python3 -m pytest -q" "word_count miscounts text with extra spaces or no words. Fix it."
echo "== both examples resolved; stopping the server"
