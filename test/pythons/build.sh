#!/usr/bin/env bash
# Build extra CPython 3.13 interpreters for the integration tests.
#
#   test/pythons/build.sh VARIANT...    build (or reuse) the named variants
#   test/pythons/build.sh all           3.13-static 3.13t-static 3.13d-static
#   test/pythons/build.sh --list        "label path" for every usable interpreter
#   test/pythons/build.sh debian-dbg    apt-get install python3.11-dbg
#
# Variants (labels used by --list and the test suite):
#   3.13-static    default configure, libpython linked statically into bin/python3.13
#   3.13t-static   --disable-gil (free-threaded), bin/python3.13t
#   3.13d-static   --with-pydebug, bin/python3.13
#   debian-dbg     Debian's own /usr/bin/python3.11-dbg (installed, not built)
#
# Sources come from Debian's python3.13 source package (trixie), fetched with
# `apt-get source` through a deb-src entry that reuses the archive URI of the
# machine's own apt sources. Only the upstream tarball inside it is used; the
# Debian patches are not applied (plain upstream build).
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
RECIPE=1
ALL_VARIANTS=(3.13-static 3.13t-static 3.13d-static)
SRC_PACKAGE=python3.13
SRC_SUITE=trixie
DEBIAN_DBG=/usr/bin/python3.11-dbg
APT_SOURCE_FILE=/etc/apt/sources.list.d/pysample-trixie-src.sources
# Build dependencies (bookworm packages) for a working interpreter with
# threading, ctypes, asyncio, multiprocessing and the usual stdlib modules.
BUILD_DEPS=(build-essential pkg-config xz-utils binutils util-linux
    libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev
    libreadline-dev libncurses-dev uuid-dev libgdbm-dev libgdbm-compat-dev)
APT_OPTS=(-o DPkg::Lock::Timeout=600)

say() { printf '%s: %s\n' "$PROG" "$*"; }
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

# --- variant table ---------------------------------------------------------

variant_flags() {   # configure flags that define a variant (prefix excluded)
    local common="--without-ensurepip --without-system-libmpdec"
    case $1 in
        3.13-static)  echo "$common" ;;
        3.13t-static) echo "$common --disable-gil" ;;
        3.13d-static) echo "$common --with-pydebug" ;;
        *) return 1 ;;
    esac
}

variant_exe() {
    case $1 in
        3.13t-static) echo "$CACHE/$1/bin/python3.13t" ;;
        *)            echo "$CACHE/$1/bin/python3.13" ;;
    esac
}

variant_expect() {  # expected "Py_GIL_DISABLED Py_DEBUG"
    case $1 in
        3.13-static)  echo "0 0" ;;
        3.13t-static) echo "1 0" ;;
        3.13d-static) echo "0 1" ;;
    esac
}

stamp_file() { echo "$CACHE/$1/.pysample-stamp"; }

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
    for v in "${ALL_VARIANTS[@]}"; do
        if variant_ok "$v"; then
            printf '%s %s\n' "$v" "$(variant_exe "$v")"
        fi
    done
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
    want="# Added by $PROG (libpysample): Debian's $SRC_PACKAGE source package
# for the extra test interpreters. Source entries only; safe to remove.
Types: deb-src
URIs: $uri
Suites: $SRC_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"
    if [[ ! -f $APT_SOURCE_FILE ]] || [[ "$(cat "$APT_SOURCE_FILE")"$'\n' != "$want" ]]; then
        say "adding deb-src $uri $SRC_SUITE main -> $APT_SOURCE_FILE"
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

prepare_source() {
    local dl=$CACHE/src orig dsc top
    mkdir -p "$dl"
    orig=$(newest "$dl/${SRC_PACKAGE}"_*.orig.tar.*)
    if [[ -z $orig ]]; then
        need_root "downloading the $SRC_PACKAGE source"
        ensure_deb_src
        say "apt-get update"
        apt-get "${APT_OPTS[@]}" update >"$CACHE/logs/apt-update.log" 2>&1 \
            || die "FAILED: apt-get update (see $CACHE/logs/apt-update.log)"
        say "apt-get source --download-only $SRC_PACKAGE (from $SRC_SUITE)"
        (cd "$dl" && apt-get "${APT_OPTS[@]}" source --download-only "$SRC_PACKAGE/$SRC_SUITE") \
            >"$CACHE/logs/apt-source.log" 2>&1 \
            || die "FAILED: apt-get source $SRC_PACKAGE (see $CACHE/logs/apt-source.log)"
        orig=$(newest "$dl/${SRC_PACKAGE}"_*.orig.tar.*)
        [[ -n $orig ]] || die "FAILED: no upstream tarball (*.orig.tar.*) in the $SRC_PACKAGE source package"
    fi
    dsc=$(newest "$dl/${SRC_PACKAGE}"_*.dsc)
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
    out=$("$exe" -c 'import sys, sysconfig, threading, ctypes, asyncio, multiprocessing; print(sys.version, sysconfig.get_config_var("Py_GIL_DISABLED"), sysconfig.get_config_var("Py_DEBUG"))' 2>>"$log") \
        || { echo "import check failed" >>"$log"; return 1; }
    echo "verify: $out" >>"$log"
    got=$(awk '{print $(NF-1), $NF}' <<<"$out")
    [[ $got == "$(variant_expect "$v")" ]] \
        || { echo "Py_GIL_DISABLED/Py_DEBUG are '$got', want '$(variant_expect "$v")'" >>"$log"; return 1; }
    nm -D --defined-only "$exe" | awk '$3 == "_PyRuntime" {f = 1} END {exit !f}' \
        || { echo "_PyRuntime is not in the dynamic symbol table of $exe" >>"$log"; return 1; }
    printf '%s\n' "$out"
}

build_variant() {
    local v=$1 prefix=$CACHE/$1 bdir=$CACHE/build/$1 log=$CACHE/logs/$1.log
    local flags start secs out
    flags=$(variant_flags "$v")
    prepare_source
    install_build_deps
    say "building $v ($SRC_VERSION; configure $flags); log: $log"
    start=$(date +%s)
    CURRENT_PREFIX=$prefix
    rm -rf "$prefix" "$bdir"
    mkdir -p "$bdir"
    : >"$log"
    local step
    # shellcheck disable=SC2086
    if ! { step=configure; (cd "$bdir" && "$SRC_DIR/configure" --prefix="$prefix" $flags) >>"$log" 2>&1; } \
        || ! { step="make"; (cd "$bdir" && nice -n 19 make -j2) >>"$log" 2>&1; } \
        || ! { step="make install"; (cd "$bdir" && nice -n 19 make -j2 install) >>"$log" 2>&1; } \
        || ! { step=verification; out=$(verify_variant "$v" "$log"); }; then
        cleanup_partial; CURRENT_PREFIX=
        die "FAILED to build $v at step '$step' (full log: $log)"
    fi
    secs=$(( $(date +%s) - start ))
    {
        stamp_key "$v"
        printf 'source=%s\nbuild_seconds=%s\nbuilt=%s\nversion=%s\n' \
            "$SRC_VERSION" "$secs" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$out"
    } >"$(stamp_file "$v").tmp"
    mv "$(stamp_file "$v").tmp" "$(stamp_file "$v")"
    CURRENT_PREFIX=
    rm -rf "$bdir"
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

# --- main ------------------------------------------------------------------

main() {
    if (($# == 0)); then usage >&2; exit 2; fi
    local targets=() a
    for a in "$@"; do
        case $a in
            --list) list_pythons; exit 0 ;;
            -h|--help) usage; exit 0 ;;
            all) targets+=("${ALL_VARIANTS[@]}") ;;
            debian-dbg) targets+=(debian-dbg) ;;
            *) variant_flags "$a" >/dev/null || die "unknown variant '$a' (want: ${ALL_VARIANTS[*]} all debian-dbg --list)"
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
