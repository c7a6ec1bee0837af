#!/bin/sh
# Builds the Pyroscope server that test/servers/backend.py scrapes and
# pushes to (issue #38) into a cache outside the repository:
#     sh test/servers/build-pyroscope.sh [--pending PID]
#     -> ~/.cache/pysample/backend/pyroscope/pyroscope   (PYSAMPLE_BACKEND_CACHE)
# Nothing is built when the binary is there.  With --pending PID the marker
# pyroscope.pending (holding PID, the process that waits for the build) is
# written first: the test waits for the build while PID lives.  A build that
# fails leaves pyroscope.failed with its reason on one line, which the test
# prints when it skips.
#
# Why this module and these steps (docs/kubernetes.md, "Tested with"): the
# Go module proxy answers 403 for github.com/parca-dev/parca and
# github.com/grafana/pyroscope, so neither `go install` can run; the
# original github.com/pyroscope-io/pyroscope v0.37.2 downloads, has pull
# mode, /ingest and /render, and builds with Go 1.26 once its godeltaprof
# is v0.1.2 without the `!go1.22` in its stub's build tag (with the tag, Go
# >= 1.22 finds runtime_expandFinalInlineFrame undefined).  About 2 min of
# module downloads and 4.5 min of compiling on 2 cores; 85 MB.
set -u
VERSION=v0.37.2
DELTAPROF=v0.1.2
cache=${PYSAMPLE_BACKEND_CACHE:-$HOME/.cache/pysample/backend}/pyroscope
bin=$cache/pyroscope
mkdir -p "$cache" || exit 1
rm -f "$cache/pyroscope.failed"
if [ "${1:-}" = --pending ]; then
    [ -x "$bin" ] || echo "${2:?--pending takes a pid}" >"$cache/pyroscope.pending"
fi

fail() {
    echo "$*" >"$cache/pyroscope.failed"
    rm -f "$cache/pyroscope.pending"
    echo "build-pyroscope: $*" >&2
    exit 1
}

[ -x "$bin" ] && { rm -f "$cache/pyroscope.pending"; exit 0; }
command -v go >/dev/null 2>&1 || fail "no go command (golang-go) to build the Pyroscope server with"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
export GOCACHE=${PYSAMPLE_GOCACHE:-$HOME/.cache/pysample/go-build}
src=$cache/src
rm -rf "$src" && mkdir -p "$src" || fail "cannot create $src"
cd "$src" || fail "cannot enter $src"

# godeltaprof v0.1.2, copied and patched: a replace directive points at it.
dir=$(go mod download -json "github.com/pyroscope-io/godeltaprof@$DELTAPROF" 2>&1 |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] ||
    fail "the Go module proxy did not give github.com/pyroscope-io/godeltaprof@$DELTAPROF"
cp -r "$dir" godeltaprof && chmod -R u+w godeltaprof || fail "cannot copy godeltaprof"
sed -i 's/^\/\/go:build go1.16 && !go1.22$/\/\/go:build go1.16/; s/^\/\/ +build go1.16,!go1.22$/\/\/ +build go1.16/' \
    godeltaprof/internal/pprof/stub.go
cat >go.mod <<EOF
module pysample.invalid/backend

go 1.19

require github.com/pyroscope-io/pyroscope $VERSION

replace github.com/pyroscope-io/godeltaprof => ./godeltaprof
EOF
# The usual "tools" file: makes `go mod tidy` resolve the server's imports.
cat >tools.go <<'EOF'
//go:build tools

package tools

import _ "github.com/pyroscope-io/pyroscope/cmd/pyroscope"
EOF
go mod tidy >tidy.log 2>&1 || fail "go mod tidy of pyroscope $VERSION failed: $(grep -m1 -E '403|404|error|cannot' tidy.log || tail -n1 tidy.log)"
go build -trimpath -o "$bin.tmp" github.com/pyroscope-io/pyroscope/cmd/pyroscope >build.log 2>&1 ||
    fail "go build of pyroscope $VERSION failed: $(grep -m1 -v '^#' build.log)"
"$bin.tmp" server --help >/dev/null 2>&1 || fail "the built pyroscope does not run"
mv "$bin.tmp" "$bin" || fail "cannot install $bin"
cd / && rm -rf "$src"
rm -f "$cache/pyroscope.pending"
echo "build-pyroscope: $bin"
