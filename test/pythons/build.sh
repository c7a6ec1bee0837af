#!/usr/bin/env bash
# Build extra CPython interpreters for the integration tests.
#
#   test/pythons/build.sh VARIANT...    build (or reuse) the named variants
#   test/pythons/build.sh all           every variant below except the 3.14 ones
#   test/pythons/build.sh --list        "label path" for every usable interpreter,
#                                       "label path pending=MARKER" for one still
#                                       being built (.ci/run builds them while the
#                                       suite runs; MARKER is <cache>/<variant>.pending)
#   test/pythons/build.sh --variants    the names 'all' stands for, one a line
#   test/pythons/build.sh debian-dbg    apt-get install python3.11-dbg
#
# Variants (labels used by --list and the test suite):
#   3.13td-static   --disable-gil --with-pydebug, libpython linked statically
#                   into bin/python3.13td: free-threaded, debug and static in
#                   one build (what `all` builds; see ALL_VARIANTS)
#   3.11-tracerefs  --with-trace-refs 3.11 (bookworm) at -O1, run from its
#                   build tree (not installed); libpysample must refuse it
#   3.13-musl       3.13 built with musl-gcc (Debian's musl-tools) against
#                   musl, libpython static: an Alpine-like interpreter, run
#                   with the musl build of libpysample (scripts/check-musl)
#   3.13-musl-shared  the same with --enable-shared: bin/python3.13 loads
#                   lib/libpython3.13.so.1.0 through its rpath, as
#                   python:3.13-alpine does; the embed suite needs it.
#                   When it is there, 3.13-musl is linked from it (its
#                   libpython3.13.a and python.o) in seconds, not built
#   3.13-static     default configure, libpython linked statically   } built
#   3.13t-static    --disable-gil (free-threaded), bin/python3.13t   } only
#   3.13d-static    --with-pydebug, bin/python3.13                   } when
#   3.14*-static    as the 3.13 ones, from python3.14 (forky, sid)   } named
#   debian-dbg      Debian's own /usr/bin/python3.11-dbg (installed, not built)
#
# Sources come from Debian's source packages (python3.13 from trixie,
# python3.14 from forky or sid, python3.11 from bookworm), fetched with
# `apt-get source` through deb-src entries that reuse the archive URI of the
# machine's own apt sources. Only the upstream tarball inside each is used;
# the Debian patches are not applied (plain upstream builds).
#
# Everything lives outside the repository, in
#   ${PYSAMPLE_PYTHONS_CACHE:-$HOME/.cache/pysample/pythons}
# with each variant installed under <cache>/<variant>/ (make install --prefix).
# A variant counts as present only once its stamp file
# <cache>/<variant>/.pysample-stamp exists; it is written last, after the
# installed interpreter passed verification. See docs/pythons.md.
set -Eeuo pipefail

PROG=test/pythons/build.sh
CACHE=${PYSAMPLE_PYTHONS_CACHE:-$HOME/.cache/pysample/pythons}
# Bump when the build recipe changes in a way that needs a rebuild.
RECIPE=3
# What CI builds: only what no other interpreter covers (issue #39: CI must
# fit its time on a new machine). pyenv gives shared GIL release builds of
# 3.9-3.13 and Debian a shared 3.11 debug build; 3.13td-static adds, in one
# build, the three things none of them has: a free-threaded interpreter, a
# debug 3.13 (read through _Py_DebugOffsets), and libpython linked into the
# executable. 3.11-tracerefs only has to start and be refused.
# The musl interpreters (issue #37) last, since their tests run last anyway
# (scripts/check-musl is run-tests' last step): 3.13-musl-shared (shared
# libpython, as Alpine's own; the embed suite needs it), then 3.13-musl,
# linked from its build in seconds (link_variant): one musl build for both.
ALL_VARIANTS=(3.13td-static 3.11-tracerefs 3.13-musl-shared 3.13-musl)
# Built only when named: the single-purpose 3.13 builds (what ALL_VARIANTS
# was before 3.13td-static), and 3.14, whose source the Debian archive
# reachable here lists (forky, sid) but answers 404 for.
OPTIONAL_VARIANTS=(3.13-static 3.13t-static 3.13d-static 3.14-static 3.14t-static 3.14d-static 3.14td-static)
DEBIAN_DBG=/usr/bin/python3.11-dbg
# Every suite a variant takes its source from; one deb-src entry lists them all
# so that the file does not change with the variant being built.
SRC_SUITES=(bookworm trixie forky sid)
APT_SOURCE_FILE=/etc/apt/sources.list.d/pysample-src.sources
# Written by earlier versions of this script (trixie only); replaced by the above.
OLD_APT_SOURCE_FILE=/etc/apt/sources.list.d/pysample-trixie-src.sources
# Build dependencies (bookworm packages) for a working interpreter with
# threading, ctypes, asyncio, multiprocessing and the usual stdlib modules.
BUILD_DEPS=(build-essential pkg-config xz-utils binutils util-linux
    libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev
    libreadline-dev libncurses-dev uuid-dev libgdbm-dev libgdbm-compat-dev
    musl-tools)
APT_OPTS=(-o DPkg::Lock::Timeout=600)

say() { printf '%s: %s\n' "$PROG" "$*"; }
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
    sed -n '2,/^#   debian-dbg/p' "$0" | sed 's/^# \{0,1\}//'
}

# --- variant table ---------------------------------------------------------

variant_flags() {   # configure flags that define a variant (prefix excluded)
    # CPython's own test modules (_testcapi, Lib/test) are never used here
    # and are a good part of the build and install time.
    local common="--without-ensurepip --without-system-libmpdec --disable-test-modules"
    case $1 in
        3.1[34]-static)   echo "$common" ;;
        3.1[34]t-static)  echo "$common --disable-gil" ;;
        3.1[34]d-static)  echo "$common --with-pydebug" ;;
        3.1[34]td-static) echo "$common --disable-gil --with-pydebug" ;;
        3.11-tracerefs)   echo "$common --with-trace-refs" ;;
        3.13-musl)        echo "$common" ;;
        3.13-musl-shared) echo "$common --enable-shared" ;;
        *) return 1 ;;
    esac
}

variant_minor() {   # "3.13" for 3.13td-static
    local v=${1%%-*}
    v=${v%d}
    echo "${v%t}"
}

# The trace-refs build is not installed: `make python` is all its one test
# needs (the interpreter starts, from its build tree, and is refused).
build_only() { [[ $1 == *-tracerefs ]]; }

variant_exe() {
    case $1 in
        *-tracerefs)      echo "$CACHE/$1/build/python" ;;
        *td-static)       echo "$CACHE/$1/bin/python$(variant_minor "$1")td" ;;
        *t-static)        echo "$CACHE/$1/bin/python$(variant_minor "$1")t" ;;
        *)                echo "$CACHE/$1/bin/python$(variant_minor "$1")" ;;
    esac
}

variant_expect() {  # expected "Py_GIL_DISABLED Py_DEBUG Py_TRACE_REFS"
    case $1 in
        *td-static)     echo "1 1 0" ;;
        *t-static)      echo "1 0 0" ;;
        *d-static)      echo "0 1 0" ;;
        *-tracerefs)    echo "0 0 1" ;;
        *)              echo "0 0 0" ;;
    esac
}

is_musl() { [[ $1 == *-musl || $1 == *-musl-shared ]]; }
is_shared() { [[ $1 == *-shared ]]; }

variant_modules() { # what the interpreter must import to count as built
    # ctypes only if libffi built (build_musl_ffi).
    if is_musl "$1"; then
        echo "threading, _socket, select, asyncio, multiprocessing"
    else
        echo "threading, ctypes, asyncio, multiprocessing"
    fi
}

# musl-gcc for CPython's configure, in <dir>/cc: it must not print Debian's
# multiarch (configure compares it with musl's triplet, x86_64-linux-musl,
# and stops), and it sees the machine's Linux kernel headers, which musl
# does not ship (as scripts/check-musl does). pkg-config is pointed at
# nothing (PKG_CONFIG_LIBDIR in build_variant) so that no library built
# for glibc is linked in.
write_musl_cc() {   # $1 dir
    local d=$1 multiarch
    command -v musl-gcc >/dev/null 2>&1 \
        || die "FAILED: musl-gcc is not installed (Debian: musl-tools): no musl interpreter"
    multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    mkdir -p "$d/kh"
    ln -sfn /usr/include/linux "$d/kh/linux"
    ln -sfn /usr/include/asm-generic "$d/kh/asm-generic"
    ln -sfn "/usr/include/$multiarch/asm" "$d/kh/asm"
    printf '#!/bin/sh\ncase "$1" in --print-multiarch) exit 0 ;; esac\nexec musl-gcc -isystem %s "$@"\n' \
        "$d/kh" >"$d/cc"
    chmod +x "$d/cc"
}

# libffi for ctypes (the integration programs drive the library's C API
# through it): Debian's is built for glibc, so bookworm's source is built
# with the same wrapper, static and position-independent, into <dir>/ffi;
# _ctypes links it in. Without it the interpreter is still built (no
# ctypes: the scenarios that need it skip, saying so). Sets FFI_PC.
FFI_PC=''
build_musl_ffi() {  # $1 dir, $2 log
    local d=$1 log=$2 dl=$CACHE/src orig top
    orig=$(newest "$dl"/libffi_*.orig.tar.*)
    if [[ -z $orig ]]; then
        (download_source libffi bookworm) || { say "no libffi source: no ctypes"; return 0; }
        orig=$(newest "$dl"/libffi_*.orig.tar.*)
    fi
    top=$(tar -tf "$orig" 2>/dev/null | head -n1 || true); top=${top%%/*}
    rm -rf "${d:?}/ffi-src" "$d/ffi-build" && mkdir -p "$d/ffi-src" "$d/ffi-build"
    if tar -C "$d/ffi-src" -xf "$orig" \
        && (cd "$d/ffi-build" && CC="$d/cc" nice -n 19 "$d/ffi-src/$top/configure" --prefix="$d/ffi" \
                --disable-shared --enable-static --with-pic --disable-docs \
                --disable-multi-os-directory && nice -n 19 make -j2 && make install) >>"$log" 2>&1; then
        FFI_PC=$d/ffi/lib/pkgconfig
    else
        say "libffi did not build for musl (see $log): no ctypes"
    fi
    rm -rf "${d:?}/ffi-src" "$d/ffi-build"
}

# 3.13-musl from 3.13-musl-shared's build when that is there: an
# --enable-shared build also installs libpython3.13.a (position-independent)
# and python.o, which link into an executable with libpython inside in a
# second, where a build of its own took 23 minutes on a busy machine
# (docs/ci.md). Its lib/ (standard library, extension modules) is a link
# to the shared build's. The executable is what the static build makes:
# all of libpython's code and _PyRuntime in it, exported (LINKFORSHARED).
linked_from() { [[ $1 == 3.13-musl ]] && echo 3.13-musl-shared || true; }

link_variant() {    # $1 variant, $2 the variant it is linked from, $3 log
    local v=$1 from=$2 log=$3 base=$CACHE/$2 prefix=$CACHE/$1 minor cfg libs
    minor=$(variant_minor "$v")
    cfg=$(echo "$base/lib/python$minor/config-$minor"-*)
    [[ -f $cfg/libpython$minor.a && -f $cfg/python.o ]] \
        || { echo "no libpython$minor.a and python.o in $cfg" >>"$log"; return 1; }
    libs=$("$base/bin/python$minor" -c 'import sysconfig as s
print(*(s.get_config_var(v) or "" for v in ("LIBS", "SYSLIBS", "LINKFORSHARED")))') || return 1
    mkdir -p "$prefix/bin" && ln -sfn "../$from/lib" "$prefix/lib" || return 1
    echo "linking $v from $from: $cfg/python.o $cfg/libpython$minor.a $libs" >>"$log"
    # shellcheck disable=SC2086
    # Whole: the extension modules need libpython's functions that python.o
    # does not (_interpreters: _PyInterpreterConfig_InitFromState), as
    # the static build links every object of libpython.
    "$base/.musl-cc/cc" -o "$prefix/bin/python$minor" "$cfg/python.o" \
        -Wl,--whole-archive "$cfg/libpython$minor.a" -Wl,--no-whole-archive $libs >>"$log" 2>&1
}

variant_package() { echo "python$(variant_minor "$1")"; }

variant_suites() {  # suites to take the source package from, in order of preference
    case $(variant_minor "$1") in
        3.11) echo bookworm ;;
        3.13) echo trixie ;;
        3.14) echo forky sid ;;   # testing first: packages there passed sid's checks
    esac
}

stamp_file() { echo "$CACHE/$1/.pysample-stamp"; }
# While .ci/run builds a variant in the background, <cache>/<variant>.pending
# exists (it removes it when the build ended, either way) and a failed build
# leaves its reason in <cache>/<variant>.failed (test/integration/run.py
# waits on the first and reports the second).
pending_file() { echo "$CACHE/$1.pending"; }
# A marker names the process that will remove it ("pid=N"); one whose
# process is gone (a run that was killed) is stale.
pending_alive() {
    local pid
    pid=$(sed -n 's/^pid=//p' "$(pending_file "$1")" 2>/dev/null) || return 1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

stamp_key() {       # what must match for a cached build to be reused
    printf 'recipe=%s\nflags=%s\n' "$RECIPE" "$(variant_flags "$1")"
}

# A variant is usable when its stamp exists and its interpreter starts.
variant_ok() {
    local exe stamp
    exe=$(variant_exe "$1"); stamp=$(stamp_file "$1")
    [[ -f $stamp && -x $exe ]] || return 1
    "$exe" -c 'pass' >/dev/null 2>&1
}

variant_current() {  # usable and built with the current flags/recipe
    variant_ok "$1" || return 1
    [[ "$(sed -n '/^recipe=/p;/^flags=/p' "$(stamp_file "$1")")" == "$(stamp_key "$1")" ]]
}

# --- --list ----------------------------------------------------------------

list_pythons() {
    local v
    for v in "${ALL_VARIANTS[@]}" "${OPTIONAL_VARIANTS[@]}"; do
        if variant_ok "$v"; then
            printf '%s %s\n' "$v" "$(variant_exe "$v")"
        elif pending_alive "$v"; then
            # Being built while the suite runs (.ci/run): its tests wait.
            printf '%s %s pending=%s\n' "$v" "$(variant_exe "$v")" "$(pending_file "$v")"
        fi
    done
    # Interpreters built by hand from CPython's own sources (docs/pythons.md):
    # their stamp names the label and the executable ("label=", "exe=").
    local stamp label exe
    shopt -s nullglob
    for stamp in "$CACHE"/*/.pysample-stamp; do
        label=$(sed -n 's/^label=//p' "$stamp")
        exe=$(sed -n 's/^exe=//p' "$stamp")
        [[ -n $label && -x $exe ]] || continue
        [[ " ${ALL_VARIANTS[*]} ${OPTIONAL_VARIANTS[*]} " == *" $label "* ]] && continue
        if "$exe" -c 'pass' >/dev/null 2>&1; then
            printf '%s %s\n' "$label" "$exe"
        fi
    done
    shopt -u nullglob
    if [[ -x $DEBIAN_DBG ]]; then
        printf '%s %s\n' debian-dbg "$DEBIAN_DBG"
    fi
}

# --- sources ---------------------------------------------------------------

need_root() {
    [[ $(id -u) -eq 0 ]] || die "$1 needs root (apt-get); run as root"
}

codename() {
    # shellcheck disable=SC1091
    (. /etc/os-release && echo "${VERSION_CODENAME:-}")
}

# Set ARCHIVE_URI to the URI of the main Debian archive from the machine's apt sources:
# an enabled binary ("deb") entry for the system's own suite (not -security,
# not -updates-only), from deb822 *.sources files or one-line *.list files.
ARCHIVE_URI=''
archive_uri() {
    local code files=() f uri
    code=$(codename)
    [[ -n $code ]] || die "cannot tell the Debian codename from /etc/os-release"
    shopt -s nullglob
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ $f == "$APT_SOURCE_FILE" ]] || files+=("$f")
    done
    if ((${#files[@]})); then
        uri=$(awk -v code="$code" '
            BEGIN { RS = ""; FS = "\n" }
            {
                types = ""; uris = ""; suites = ""; enabled = "yes"
                for (i = 1; i <= NF; i++) {
                    line = $i
                    if (line ~ /^[ \t]*#/) continue
                    n = index(line, ":"); if (!n) continue
                    key = tolower(substr(line, 1, n - 1))
                    val = substr(line, n + 1); gsub(/^[ \t]+|[ \t]+$/, "", val)
                    if (key == "types") types = val
                    else if (key == "uris") uris = val
                    else if (key == "suites") suites = val
                    else if (key == "enabled") enabled = tolower(val)
                }
                if (enabled == "no") next
                if ((" " types " ") !~ / deb /) next
                ns = split(suites, s, /[ \t]+/)
                for (j = 1; j <= ns; j++) if (s[j] == code) {
                    split(uris, u, /[ \t]+/); print u[1]; exit
                }
            }' "${files[@]}")
    fi
    if [[ -z ${uri:-} ]]; then
        files=()
        [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
        for f in /etc/apt/sources.list.d/*.list; do files+=("$f"); done
        if ((${#files[@]})); then
            uri=$(awk -v code="$code" '
                $1 == "deb" {
                    i = 2
                    if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    if ($(i + 1) == code) { print $i; exit }
                }' "${files[@]}")
        fi
    fi
    shopt -u nullglob
    [[ -n ${uri:-} ]] || die "no Debian archive URI for '$code' found in /etc/apt/sources.list{,.d/}"
    ARCHIVE_URI=${uri%/}
}

ensure_deb_src() {
    local uri want
    archive_uri
    uri=$ARCHIVE_URI
    want="# Added by $PROG (libpysample): Debian's python3.N source packages
# for the extra test interpreters. Source entries only; safe to remove.
Types: deb-src
URIs: $uri
Suites: ${SRC_SUITES[*]}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"
    if [[ -f $OLD_APT_SOURCE_FILE ]]; then
        say "removing $OLD_APT_SOURCE_FILE (superseded by $APT_SOURCE_FILE)"
        rm -f "$OLD_APT_SOURCE_FILE"
    fi
    if [[ ! -f $APT_SOURCE_FILE ]] || [[ "$(cat "$APT_SOURCE_FILE")"$'\n' != "$want" ]]; then
        say "adding deb-src $uri ${SRC_SUITES[*]} main -> $APT_SOURCE_FILE"
        printf '%s' "$want" > "$APT_SOURCE_FILE"
    fi
}

install_build_deps() {
    local missing=() p
    for p in "${BUILD_DEPS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    if ((${#missing[@]})); then
        say "installing build dependencies: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y \
            --no-install-recommends "${missing[@]}" >"$CACHE/logs/apt-install.log" 2>&1 \
            || die "FAILED: apt-get install of build dependencies (see $CACHE/logs/apt-install.log)"
    fi
}

# Sets SRC_DIR (pristine upstream tree) and SRC_VERSION (Debian version).
SRC_DIR='' SRC_VERSION=''

newest() {          # newest (version-sorted) existing file among the arguments
    local f
    for f in "$@"; do
        if [[ -f $f && $f != *.asc ]]; then printf '%s\n' "$f"; fi
    done | sort -V | tail -n1
}

UPDATED=0
download_source() {  # $1 package, $2... suites to try in order
    local pkg=$1 dl=$CACHE/src suite log
    shift
    need_root "downloading the $pkg source"
    ensure_deb_src
    if ((!UPDATED)); then
        say "apt-get update"
        apt-get "${APT_OPTS[@]}" update >"$CACHE/logs/apt-update.log" 2>&1 \
            || die "FAILED: apt-get update (see $CACHE/logs/apt-update.log)"
        UPDATED=1
    fi
    for suite in "$@"; do
        log=$CACHE/logs/apt-source-$pkg-$suite.log
        say "apt-get source --download-only $pkg/$suite"
        if (cd "$dl" && apt-get "${APT_OPTS[@]}" source --download-only "$pkg/$suite") >"$log" 2>&1; then
            return 0
        fi
        say "no $pkg source in $suite (see $log)"
    done
    die "FAILED: apt-get source $pkg from any of: $* (logs: $CACHE/logs/apt-source-$pkg-*.log)"
}

prepare_source() {  # $1 variant
    local pkg dl=$CACHE/src orig dsc top
    pkg=$(variant_package "$1")
    mkdir -p "$dl"
    orig=$(newest "$dl/${pkg}"_*.orig.tar.*)
    if [[ -z $orig ]]; then
        # shellcheck disable=SC2046
        download_source "$pkg" $(variant_suites "$1")
        orig=$(newest "$dl/${pkg}"_*.orig.tar.*)
        [[ -n $orig ]] || die "FAILED: no upstream tarball (*.orig.tar.*) in the $pkg source package"
    fi
    dsc=$(newest "$dl/${pkg}"_*.dsc)
    SRC_VERSION=$(basename "${dsc:-$orig}" .dsc)
    top=$(tar -tf "$orig" 2>/dev/null | head -n1 || true); top=${top%%/*}
    [[ -n $top ]] || die "FAILED: cannot read $orig"
    SRC_DIR=$dl/$top
    if [[ ! -f $SRC_DIR/.pysample-unpacked ]]; then
        say "unpacking $(basename "$orig")"
        rm -rf "$SRC_DIR"
        tar -C "$dl" -xf "$orig" || die "FAILED: unpacking $orig"
        [[ -x $SRC_DIR/configure ]] || die "FAILED: $orig has no $top/configure"
        touch "$SRC_DIR/.pysample-unpacked"
    fi
}

# --- build -----------------------------------------------------------------

CURRENT_PREFIX=
cleanup_partial() {
    if [[ -n $CURRENT_PREFIX ]]; then
        rm -rf "$CURRENT_PREFIX"
    fi
}

verify_variant() {  # $1 variant, $2 log; prints the verification line
    local v=$1 log=$2 exe out got
    exe=$(variant_exe "$v")
    [[ -x $exe ]] || { echo "no interpreter at $exe" >>"$log"; return 1; }
    local mods
    mods=$(variant_modules "$v")
    out=$("$exe" -c "import sys, sysconfig, $mods; print(sys.version, *[int(bool(sysconfig.get_config_var(v))) for v in ('Py_GIL_DISABLED', 'Py_DEBUG', 'Py_TRACE_REFS')])" 2>>"$log") \
        || { echo "import check failed" >>"$log"; return 1; }
    echo "verify: $out" >>"$log"
    got=$(awk '{print $(NF-2), $(NF-1), $NF}' <<<"$out")
    [[ $got == "$(variant_expect "$v")" ]] \
        || { echo "Py_GIL_DISABLED/Py_DEBUG/Py_TRACE_REFS are '$got', want '$(variant_expect "$v")'" >>"$log"; return 1; }
    # A shared build exports _PyRuntime from libpython, which its
    # executable must name (and have found through its rpath: the import
    # check above ran without LD_LIBRARY_PATH).
    local dso=$exe
    if is_shared "$v"; then
        dso=$CACHE/$v/lib/libpython$(variant_minor "$v").so.1.0
        readelf -d "$exe" | grep -q "NEEDED.*\[libpython$(variant_minor "$v")\.so" \
            || { echo "$exe does not load libpython$(variant_minor "$v").so" >>"$log"; return 1; }
    fi
    nm -D --defined-only "$dso" | awk '$3 == "_PyRuntime" {f = 1} END {exit !f}' \
        || { echo "_PyRuntime is not in the dynamic symbol table of $dso" >>"$log"; return 1; }
    if is_musl "$v"; then
        readelf -l "$exe" | grep -q 'interpreter: /lib/ld-musl-' \
            || { echo "$exe is not linked against musl (no ld-musl program interpreter)" >>"$log"; return 1; }
        out="$out musl"
    fi
    printf '%s\n' "$out"
}

# Writes the stamp of a variant that passed verification ($2: its line).
write_stamp() {     # $1 variant, $2 verification line, $3 seconds, $4 how
    {
        stamp_key "$1"
        printf 'source=%s\nbuild_seconds=%s\nbuilt=%s\nversion=%s\n%s' \
            "$SRC_VERSION" "$3" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$2" "$4"
    } >"$(stamp_file "$1").tmp"
    mv "$(stamp_file "$1").tmp" "$(stamp_file "$1")"
}

# Links $1 from the variant linked_from names when that one is current;
# fails (the caller builds it instead) when it is not or the link fails.
try_link_variant() {
    local v=$1 from log=$CACHE/logs/$1.log start out
    from=$(linked_from "$v")
    [[ -n $from ]] && variant_current "$from" || return 1
    start=$(date +%s)
    CURRENT_PREFIX=$CACHE/$v
    rm -rf "${CURRENT_PREFIX:?}"
    : >"$log"
    if link_variant "$v" "$from" "$log" && out=$(verify_variant "$v" "$log"); then
        SRC_VERSION=$(sed -n 's/^source=//p' "$(stamp_file "$from")")
        write_stamp "$v" "$out" "$(( $(date +%s) - start ))" "linked_from=$from"$'\n'
        CURRENT_PREFIX=
        say "linked $v from $from: $(variant_exe "$v")"
        say "  $out; _PyRuntime exported"
        return 0
    fi
    cleanup_partial; CURRENT_PREFIX=
    say "could not link $v from $from (see $log): building it"
    return 1
}

build_variant() {
    local v=$1 prefix=$CACHE/$1 bdir=$CACHE/build/$1 log=$CACHE/logs/$1.log
    local targets=() install=1
    local opt=()
    try_link_variant "$v" && return 0
    if build_only "$v"; then
        # Built where it stays: <cache>/<variant>/build (variant_exe), at
        # -O1, which compiles in half the time of the default -O3 and
        # changes no layout; not installed (its test program needs the
        # extension modules, ctypes among them, not an installed tree).
        bdir=$prefix/build install=0 opt=(OPT="-g -O1")
    fi
    local flags start secs out
    flags=$(variant_flags "$v")
    prepare_source "$v"
    install_build_deps
    say "building $v ($SRC_VERSION; configure $flags); log: $log"
    start=$(date +%s)
    CURRENT_PREFIX=$prefix
    rm -rf "$prefix" "$bdir"
    mkdir -p "$bdir"
    : >"$log"
    if is_musl "$v"; then
        write_musl_cc "$prefix/.musl-cc"
        build_musl_ffi "$prefix/.musl-cc" "$log"
        # -O1, as the trace-refs build: half the compile time of -O3 on a
        # busy machine, and no layout changes. The compiler wrapper stays
        # with the build (sysconfig names it); pkg-config sees our libffi
        # alone, nothing built for glibc.
        opt+=(CC="$prefix/.musl-cc/cc" PKG_CONFIG_LIBDIR="${FFI_PC:-/nonexistent}"
              PKG_CONFIG_PATH= OPT="-g -O1")
        # The shared build finds its libpython through an rpath, as
        # Alpine's finds it in /usr/lib: no LD_LIBRARY_PATH in the tests.
        is_shared "$v" && opt+=(LDFLAGS="-Wl,-rpath,$prefix/lib")
    fi
    local step
    # shellcheck disable=SC2086
    if ! { step=configure; (cd "$bdir" && env "${opt[@]}" "$SRC_DIR/configure" --prefix="$prefix" $flags) >>"$log" 2>&1; } \
        || ! { step="make"; (cd "$bdir" && nice -n 19 make -j2 "${targets[@]}") >>"$log" 2>&1; } \
        || ! { step="make install"; ((!install)) || (cd "$bdir" && nice -n 19 make -j2 install) >>"$log" 2>&1; } \
        || ! { step=verification; out=$(verify_variant "$v" "$log"); }; then
        cleanup_partial; CURRENT_PREFIX=
        die "FAILED to build $v at step '$step' (full log: $log)"
    fi
    secs=$(( $(date +%s) - start ))
    write_stamp "$v" "$out" "$secs" ""
    CURRENT_PREFIX=
    ((!install)) || rm -rf "$bdir"
    say "built $v in $((secs / 60))m$((secs % 60))s: $(variant_exe "$v")"
    say "  $out; _PyRuntime exported"
}

do_variant() {
    local v=$1
    if variant_current "$v"; then
        say "reusing $v: $(variant_exe "$v")"
        return 0
    fi
    if [[ -e $CACHE/$v ]]; then
        say "$v: cached build missing, broken or built with other flags; rebuilding"
    fi
    build_variant "$v"
}

install_debian_dbg() {
    if [[ -x $DEBIAN_DBG ]]; then
        say "reusing debian-dbg: $DEBIAN_DBG"
        return 0
    fi
    need_root "debian-dbg"
    say "apt-get install -y python3.11-dbg"
    DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y python3.11-dbg \
        || die "FAILED: apt-get install python3.11-dbg"
    [[ -x $DEBIAN_DBG ]] || die "FAILED: $DEBIAN_DBG missing after installing python3.11-dbg"
    say "installed debian-dbg: $DEBIAN_DBG"
}

# .ci/run, before it builds VARIANTs in the background while the suite runs:
# a marker for each that is not built yet, naming PID (the process that
# removes it when that build ended); prints those variants.
mark_pending() {
    local pid=$1 v
    shift
    mkdir -p "$CACHE"
    for v in "$@"; do
        variant_flags "$v" >/dev/null || die "unknown variant '$v'"
        variant_current "$v" && continue
        rm -f "$CACHE/$v.failed"
        printf 'pid=%s\n' "$pid" >"$(pending_file "$v")"
        printf '%s\n' "$v"
    done
}

# --- main ------------------------------------------------------------------

main() {
    if (($# == 0)); then usage >&2; exit 2; fi
    local targets=() a
    for a in "$@"; do
        case $a in
            --list) list_pythons; exit 0 ;;
            --variants) printf '%s\n' "${ALL_VARIANTS[@]}"; exit 0 ;;
            --build-deps) printf '%s\n' "${BUILD_DEPS[@]}"; exit 0 ;;
            --pending)  # --pending PID VARIANT...: mark the ones not built yet
                shift; mark_pending "$@"; exit 0 ;;
            -h|--help) usage; exit 0 ;;
            all) targets+=("${ALL_VARIANTS[@]}") ;;
            debian-dbg) targets+=(debian-dbg) ;;
            *) variant_flags "$a" >/dev/null || die "unknown variant '$a' (want: ${ALL_VARIANTS[*]} ${OPTIONAL_VARIANTS[*]} all debian-dbg --list)"
               targets+=("$a") ;;
        esac
    done
    mkdir -p "$CACHE/logs"
    # One build at a time per cache (other sessions may share it).
    exec 9>"$CACHE/.lock"
    if ! flock -n 9; then
        say "waiting for another build.sh using $CACHE"
        flock 9
    fi
    trap 'cleanup_partial' EXIT
    trap 'printf "%s: FAILED: unexpected error (line %s, exit %s)\n" "$PROG" "$LINENO" "$?" >&2' ERR
    trap 'cleanup_partial; trap - EXIT; die "interrupted"' INT TERM
    local seen=" " t
    for t in "${targets[@]}"; do
        [[ $seen == *" $t "* ]] && continue
        seen+="$t "
        if [[ $t == debian-dbg ]]; then install_debian_dbg; else do_variant "$t"; fi
    done
}

main "$@"
