#!/usr/bin/env bash
# build-progress.sh: `go build` that says what it is doing. The first build
# on a machine compiles Go's standard library and every dependency, about
# 500 packages, and takes several minutes (about 8 on two cores); go build
# prints nothing meanwhile. This counts the packages as go build -v names
# them, "[k/N] package", on standard error: on a terminal in one line that
# is rewritten, elsewhere one line each. A build whose packages are all in
# Go's cache prints nothing. Standard output is go build's own, and the
# exit status is go build's.
#
# usage: build-progress.sh [go build flags] -- package...
# GO names the go command (default: go).
set -euo pipefail
go="${GO:-go}"
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  flags+=("$1")
  shift
done
if [ $# -lt 2 ]; then
  echo "usage: build-progress.sh [go build flags] -- package..." >&2
  exit 2
fi
shift

# N: the packages whose compiled form is not in Go's cache ("stale"). It
# is an upper bound: a package whose dependencies changed only inside is
# found in the cache after all, and go build does not name it.
if ! stale="$("$go" list -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' "$@")"; then
  echo "build-progress: go list failed; building without a count" >&2
  exec "$go" build ${flags[@]+"${flags[@]}"} "$@"
fi
# On a terminal the count is one line, rewritten in place.
tty=0
[ -t 2 ] && tty=1
started=$SECONDS
work="$(mktemp -d -t build-progress-XXXXXX)"
trap 'rm -rf "$work"' EXIT
printf '%s\n' "$stale" | grep -v '^$' >"$work/stale" || true
total=$(wc -l <"$work/stale" | tr -d ' ')

# count reads go build -v's standard error: a line naming a package it
# compiles becomes "[k/N] package"; anything else (errors) passes through.
# It leaves k in $work/counted. (awk, not a bash map: macOS has bash 3.)
count() {
  awk -v total="$total" -v tty="$tty" -v stale="$work/stale" -v counted="$work/counted" '
    BEGIN {
      while ((getline p < stale) > 0) todo[p] = 1
      close(stale)
    }
    !($0 in todo) {
      if (open) printf "\n"
      open = 0
      print
      fflush()
      next
    }
    {
      k++
      if (k == 1 && total >= 100)
        printf "compiling %d packages: a first build compiles the Go standard library and every dependency once, which takes several minutes (about 8 on two cores); later builds take seconds\n", total
      else if (k == 1)
        printf "compiling %d packages\n", total
      if (tty) { printf "\r\033[K[%d/%d] %s", k, total, $0; open = 1 }
      else printf "[%d/%d] %s\n", k, total, $0
      fflush()
    }
    END {
      if (open) printf "\n"
      print k + 0 > counted
    }
  '
}

# go build's stdout stays stdout (fd 3); its stderr goes through count.
set +e
{
  "$go" build -v ${flags[@]+"${flags[@]}"} "$@" 2>&1 1>&3 3>&- | count 1>&2
  status=${PIPESTATUS[0]}
} 3>&1
k="$(cat "$work/counted" 2>/dev/null || echo 0)"
if [ "$status" -eq 0 ] && [ "${k:-0}" -gt 0 ]; then
  took=$((SECONDS - started))
  packages=packages
  [ "$k" -eq 1 ] && packages=package
  printf 'built in %dm%02ds (%d %s compiled)\n' "$((took / 60))" "$((took % 60))" "$k" "$packages" >&2
fi
exit "$status"
