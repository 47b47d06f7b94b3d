#!/usr/bin/env bash
# `go build` that says what it is doing. Wrench's first build downloads its
# modules and compiles about 700 packages, minutes on a small machine, and
# plain `go build` is silent all that time. This shows progress: on a
# terminal one line redrawn in place ("building bin/wrench: 312/699
# packages (95s)"), otherwise a plain line every WRENCH_PROGRESS_EVERY
# seconds (default 15). Compiler errors pass through as go prints them, and
# the exit status is go's. A build with everything cached prints one line.
#
# usage: scripts/gobuild.sh OUT [go build flags...] PACKAGE
set -uo pipefail
go=${GO:-go}
out=$1
shift
pkg=${*: -1}
every=${WRENCH_PROGRESS_EVERY:-15}
live=0
if [ -t 2 ] && [ "${TERM:-}" != dumb ]; then live=1; fi
start=$SECONDS

# say prints a progress message: redrawn in place on a terminal.
say() {
  if [ "$live" = 1 ]; then printf '\r\033[K%s' "$1" >&2; else printf '%s\n' "$1" >&2; fi
}

say "building $out: checking modules…"
$go mod download || exit $?
total=$($go list -deps "$pkg" 2>/dev/null | wc -l | tr -d ' ')

$go build -v -o "$out" "$@" 2>&1 | {
  n=0
  last=$SECONDS
  while IFS= read -r line; do
    case $line in
    *" "* | *:* | "#"*) # not a package path: an error, a note, a download
      [ "$live" = 1 ] && printf '\r\033[K' >&2
      printf '%s\n' "$line" >&2
      ;;
    *)
      n=$((n + 1))
      if [ "$live" = 1 ] || [ $((SECONDS - last)) -ge "$every" ]; then
        say "building $out: $n/$total packages compiled ($((SECONDS - start))s)"
        last=$SECONDS
      fi
      ;;
    esac
  done
}
status=${PIPESTATUS[0]}
[ "$live" = 1 ] && printf '\r\033[K' >&2
if [ "$status" = 0 ]; then
  printf 'built %s in %ss\n' "$out" $((SECONDS - start)) >&2
else
  printf 'building %s failed (go build exit %s)\n' "$out" "$status" >&2
fi
exit "$status"
