#!/usr/bin/env bash
# Runs every seenapi test on a fresh machine: installs what the tests need
# (Debian's redis-server, chromium, nginx for the dashboard behind a reverse
# proxy, and nodejs and npm for the TypeScript
# client generated from openapi.yaml, whose npm packages the test installs
# with npm ci) when missing, then static checks, the
# race-detected tests of the concurrent packages, the tests too slow for the
# race detector, all other tests, and short bounded fuzz runs of the decoders
# and of the API's request bodies.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -x /usr/sbin/nginx ] || missing+=(nginx)  # /usr/sbin, where the tests look, is not in every PATH
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "test.sh: installing ${missing[*]} with apt-get"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

race_pkgs="./storage/... ./eviction/... ./api/..."
echo "== go test -race $race_pkgs"
go test -race -count=1 -timeout 30m $race_pkgs

# Badger's value-log GC races with its writes under -race (a race inside
# Badger), and filling the disk's margin and a million users take too long
# under the race detector: these run once, here.
echo "== go test: soak, full disk, a million users and the text check in full, without -race"
go test -count=1 -timeout 10m -run '^(TestSoakDiskUseLevelsOff|TestWritesStopWithErrFullAsTheDiskFills|TestFewUsersWrittenBackOftenReclaimSpace)$' ./storage
go test -count=1 -timeout 30m -run '^TestMillionUsersThroughTenthBudget$' -v ./eviction | grep -E '^(---|ok|FAIL|\s+million_test)'
# Under -race, a pure function's comparison on random inputs tries a
# fortieth of them (the race detector slowed it up to 20 s).
go test -count=1 -run '^TestTextProblemFastPath$' ./api

echo "== go test (the rest)"
go test -count=1 -timeout 30m $(go list ./... | grep -v -E '/(storage|eviction|api)(/|$)')

# fuzz TARGET TIME PKG runs one bounded fuzz run. Go 1.26's fuzzing
# coordinator can report a bare "context deadline exceeded" when -fuzztime
# ends while a worker is mid-input (golang/go#75804, fixed in Go 1.27): no
# input failed and none is written. Such a run, and only such a run, is run
# once more; a real finding writes its input under testdata/fuzz and fails.
# Minimizing a new input may take 2 s, not Go's 60: an input that declares
# a filter near the largest Decode accepts (2^30 bits, from a few bytes)
# takes a second or so to run, and minimizing one used to take the whole
# run (FuzzDecodeBody: 9,444 inputs in 25 s, none after the first 3 s;
# 545,789 with 2 s).
fuzz_once() { go test -run '^$' -fuzz "^$1\$" -fuzztime "$2" -fuzzminimizetime 2s "$3"; }
fuzz() {
  local out
  if out=$(fuzz_once "$@" 2>&1); then
    printf '%s\n' "$out" | tail -n 3
    return
  fi
  printf '%s\n' "$out"
  if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q -E 'Failing input written|panic:' <<<"$out"; then
    echo "test.sh: $1 stopped on the fuzzing coordinator's deadline race (golang/go#75804); running it once more"
    fuzz_once "$@"
    return
  fi
  return 1
}
echo "== fuzz (bounded)"
fuzz FuzzDecode 15s ./userfilter
fuzz FuzzDecodeBody 30s ./userfilter
fuzz FuzzParseKeys 10s ./storage
fuzz FuzzRequestBody 20s ./api
fuzz FuzzParseNamespaces 10s ./cmd/seenapi
echo "test.sh: all tests passed"
