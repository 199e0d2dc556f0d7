#!/usr/bin/env bash
# Builds an x86-64 bzImage for the rig's QEMU guest from Debian's linux-source-6.1 (or
# -6.12) package, with a patch series applied, and caches it.
#
#   traces/rig/kernel/build.sh [--jobs N] NAME
#   traces/rig/kernel/build.sh --check NAME...
#
# NAME is [SOURCE:]SERIES. SOURCE is the linux-source package's version, 6.1 (the
# default) or 6.12. SERIES is `stock` (no patches) or patch series joined by `+`
# (`sis-stats+noinline`, `6.12:sis-stats+noinline`); each series is
# traces/rig/patches/<series>/*.patch on 6.1 and traces/rig/patches/<SOURCE>/<series>/*.patch
# on any other source, applied in file-name order, the series in the order named. The
# config is `make tinyconfig` with traces/rig/kernel/guest.config (and guest-SOURCE.config
# if there is one) merged over it and `make olddefconfig`; nothing is built as a module.
#
# The image goes to target/rig-cache/kernel/images/DIR-KEY/bzImage, DIR the NAME with
# `SOURCE:` written `SOURCE-` (none on 6.1), KEY a hash of the source package version, the
# config fragments and the patches; an image already there is not rebuilt. The last line
# printed on stdout is the path of the bzImage.
#
# --check: the packages resolve, every patch of each NAME applies (on a copy of the files
# it touches, in order, without touching the build tree) and olddefconfig keeps every
# option of the fragments, set or not set; nothing is built, and without the full tree only
# what that reads is unpacked (below, check_source).
#
# The build runs under `nice -n 19` with -j2 (--jobs to change). Each source is unpacked
# once into target/rig-cache/kernel/linux-source-SOURCE (kept pristine) and hard-linked into
# a build tree of its own (tree, build and applied on 6.1; tree-SOURCE, build-SOURCE and
# applied-SOURCE otherwise) whose patched files are swapped when NAME changes, so a second
# kernel on the same source rebuilds only what its patches touch.
set -euo pipefail

top=$(cd "$(dirname "$0")/../../.." && pwd)
here=$top/traces/rig/kernel
patchdir=$top/traces/rig/patches
cache=$top/target/rig-cache/kernel
fragment=$here/guest.config
check=0
jobs=2
name=
names=()
while [ $# -gt 0 ]; do
    case $1 in
        --check) check=1 ;;
        --jobs) jobs=$2; shift ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        -*) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
        *) names+=("$1") ;;
    esac
    shift
done
[ ${#names[@]} -gt 0 ] || { echo "build.sh: NAME needed ([6.12:]stock, or series joined by +)" >&2; exit 2; }
[ $check = 1 ] || [ ${#names[@]} = 1 ] || { echo "build.sh: one NAME only, except with --check" >&2; exit 2; }

# The sources build.sh knows: each is Debian's linux-source-SOURCE package.
sources=(6.1 6.12)

# NAME's source into source, its series into series_name; 6.1 when NAME names none.
source_of() {
local v
source=6.1 series_name=$1
if [[ $1 == *:* ]]; then
    source=${1%%:*} series_name=${1#*:}
fi
for v in "${sources[@]}"; do [ "$v" = "$source" ] && return 0; done
echo "build.sh: unknown source $source in $1 (${sources[*]})" >&2
exit 2
}

# Where a source's patch series are: patches/ itself for 6.1, which was the only one.
series_dir() {
if [ "$1" = 6.1 ]; then echo "$patchdir"; else echo "$patchdir/$1"; fi
}

# The patches of NAME, in order, into patches[].
series_patches() {
local s p n series dir
source_of "$1"
dir=$(series_dir "$source")
patches=()
if [ "$series_name" != stock ]; then
    IFS=+ read -r -a series <<< "$series_name"
    for s in "${series[@]}"; do
        [ -n "$s" ] && [ -d "$dir/$s" ] ||
            { echo "build.sh: no patch series $s in ${dir#"$top"/} (for source $source)" >&2; exit 2; }
        n=0
        for p in "$dir/$s"/*.patch; do
            [ -f "$p" ] || continue
            patches+=("$p"); n=$((n + 1))
        done
        [ $n -gt 0 ] || { echo "build.sh: series $s has no *.patch" >&2; exit 2; }
    done
fi
}
for n in "${names[@]}"; do series_patches "$n"; done

# The tools and the source packages of every NAME.
need=()
used=()
for n in "${names[@]}"; do
    source_of "$n"
    [[ " ${used[*]} " == *" $source "* ]] || used+=("$source")
done
for v in "${used[@]}"; do
    dpkg -s "linux-source-$v" > /dev/null 2>&1 || need+=("linux-source-$v")
done
for t in gcc:gcc make:make flex:flex bison:bison bc:bc xz:xz-utils patch:patch; do
    command -v "${t%%:*}" > /dev/null || need+=("${t#*:}")
done
dpkg -s libelf-dev > /dev/null 2>&1 || need+=(libelf-dev)
if [ ${#need[@]} -gt 0 ]; then
    echo "build.sh: installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" > /dev/null
fi

# Source $1's package version into version, its pristine tree into src (unpacked once per
# package version), its config fragments into fragments[], and the suffix of its build
# tree's directories into sfx (none on 6.1, whose tree, build and applied came first).
use_source() {
local v=$1
version=$(dpkg-query -W -f='${Version}' "linux-source-$v")
tarball=/usr/src/linux-source-$v.tar.xz
[ -f "$tarball" ] || { echo "build.sh: $tarball missing (linux-source-$v $version)" >&2; exit 1; }
sfx=
[ "$v" = 6.1 ] || sfx=-$v
fragments=("$fragment")
[ ! -f "$here/guest-$v.config" ] || fragments+=("$here/guest-$v.config")
src=$cache/linux-source-$v
mkdir -p "$cache"
if [ "$(cat "$src/.rig-version" 2>/dev/null)" = "$version" ]; then
    return 0
fi
if [ $check = 1 ]; then
    check_source "$v"
    return 0
fi
echo "build.sh: unpacking linux-source-$v $version" >&2
rm -rf "$src" "$cache/tree$sfx" "$cache/build$sfx" "$cache/applied$sfx"
tar -xf "$tarball" -C "$cache"
echo "$version" > "$src/.rig-version"
}

# --check without the full tree reads a part of the source, unpacked once into
# linux-source-SOURCE-check: what configuring reads (every Kconfig, Makefile and Kbuild file,
# scripts/, arch/x86/) and kernel/, where the patches are. That is some 70 MB against the
# full tree's 1.5 GB, so checking does not need the disk a build does.
check_source() {
local v=$1
src=$cache/linux-source-$v-check
if [ "$(cat "$src/.rig-version" 2>/dev/null)" != "$version" ]; then
    echo "build.sh: unpacking what --check reads of linux-source-$v $version" >&2
    rm -rf "$src" "$src.tmp"
    mkdir -p "$src.tmp"
    tar -xf "$tarball" -C "$src.tmp" --wildcards \
        "linux-source-$v/scripts" "linux-source-$v/arch/x86" "linux-source-$v/kernel" \
        '*/Kconfig*' '*/Makefile*' '*/Kbuild*'
    mv "$src.tmp/linux-source-$v" "$src"
    rm -rf "$src.tmp"
    echo "$version" > "$src/.rig-version"
fi
}

# Files a patch touches (p1 paths).
touched() {
    sed -n -e 's#^--- a/\([^\t ]*\).*#\1#p' -e 's#^+++ b/\([^\t ]*\).*#\1#p' "$@" | sort -u
}

# Applies the patches in order on a copy of the files they touch, taken from the pristine
# source; prints patch's complaints and fails on the first patch that does not apply.
dry_run() {
    local d=$1 f p
    [ ${#patches[@]} -gt 0 ] || return 0
    for f in $(touched "${patches[@]}"); do
        # A file outside the part --check unpacks comes from the tarball (if it is there:
        # a patch may create it), unpacked aside and moved in whole, so an interrupted
        # unpack leaves no half file in the cached tree.
        if [ ! -f "$src/$f" ] && [[ $src == *-check ]]; then
            rm -rf "$d.unpack" && mkdir -p "$d.unpack"
            if tar -xf "$tarball" -C "$d.unpack" --strip-components=1 "linux-source-$source/$f" 2> /dev/null; then
                mkdir -p "$(dirname "$src/$f")" && mv "$d.unpack/$f" "$src/$f"
            fi
            rm -rf "$d.unpack"
        fi
        if [ -f "$src/$f" ]; then mkdir -p "$d/$(dirname "$f")"; cp "$src/$f" "$d/$f"; fi
    done
    for p in "${patches[@]}"; do
        patch -p1 -s -N --fuzz=0 -d "$d" < "$p" > "$d.log" 2>&1 ||
            { echo "build.sh: ${p#"$top"/} does not apply:" >&2; cat "$d.log" >&2; return 1; }
    done
}

# The config for output directory $1, from the pristine source: tinyconfig, the fragments,
# olddefconfig; fails naming every fragment option olddefconfig did not keep.
configure() {
    local out=$1 line missing=()
    mkdir -p "$out"
    make -s -C "$src" O="$out" ARCH=x86_64 tinyconfig > "$out/config.log" 2>&1
    "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}" >> "$out/config.log" 2>&1
    echo "CONFIG_LOCALVERSION=\"-rig-$series_name\"" >> "$out/.config"
    make -s -C "$src" O="$out" ARCH=x86_64 olddefconfig >> "$out/config.log" 2>&1
    while read -r line; do
        case $line in
            CONFIG_*) grep -qxF "$line" "$out/.config" || missing+=("$line") ;;
            "# CONFIG_"*" is not set")
                line=${line#"# "}; line=${line%" is not set"}
                ! grep -q "^$line=" "$out/.config" || missing+=("# $line is not set") ;;
        esac
    done < <(cat "${fragments[@]}")
    if [ ${#missing[@]} -gt 0 ]; then
        echo "build.sh: olddefconfig did not keep: ${missing[*]}" >&2
        return 1
    fi
    if grep -q '=m$' "$out/.config"; then
        echo "build.sh: the config builds modules: $(grep '=m$' "$out/.config" | tr '\n' ' ')" >&2
        return 1
    fi
}

if [ $check = 1 ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    for v in "${used[@]}"; do
        use_source "$v"
        for n in "${names[@]}"; do
            series_patches "$n"
            [ "$source" = "$v" ] || continue
            dry_run "$work/tree-${n//[:\/]/-}"
            echo "build.sh: --check: $n: ${#patches[@]} patches apply" >&2
        done
        configure "$work/build-$v"
        echo "build.sh: --check: linux-source-$v $version, config accepted ($(grep -c '=y$' "$work/build-$v/.config") options set); not building" >&2
    done
    exit 0
fi

name=${names[0]}
series_patches "$name"
use_source "$source"
# The fragment of a source other than 6.1 is hashed too; 6.1's keys are as they were.
key=$( { echo "$version"; cat "${fragments[@]}"; for p in "${patches[@]}"; do basename "$p"; cat "$p"; done; } |
       sha256sum | cut -c1-12)
dir=$series_name
[ "$source" = 6.1 ] || dir=$source-$series_name
image=$cache/images/$dir-$key

if [ -f "$image/bzImage" ]; then
    echo "build.sh: cached: $name ($key)" >&2
    echo "$image/bzImage"
    exit 0
fi

# The build tree: the pristine source hard-linked, with the files of the previously applied
# patches put back (as new files, so make sees them change) before this NAME's are applied.
tree=$cache/tree$sfx
applied=$cache/applied$sfx
if [ ! -d "$tree" ]; then
    cp -al "$src" "$tree"
    rm -rf "$applied"
fi
mkdir -p "$applied"
prev=("$applied"/*.patch)
if [ -f "${prev[0]}" ]; then
    for f in $(touched "${prev[@]}"); do
        rm -f "$tree/$f"
        if [ -f "$src/$f" ]; then cp "$src/$f" "$tree/$f"; fi
    done
    rm -f "$applied"/*.patch
fi
i=0
for p in "${patches[@]}"; do
    i=$((i + 1))
    # Recorded before applying, so a half-applied patch is undone next time.
    cp "$p" "$applied/$(printf %02d $i)-$(basename "$p")"
    # patch replaces each file it changes with a new one: the hard link to the pristine
    # source is broken, not written through.
    patch -p1 -s -N --fuzz=0 -d "$tree" < "$p" || { echo "build.sh: ${p#"$top"/} does not apply" >&2; exit 1; }
done

build=$cache/build$sfx
configure "$build.new"
if ! cmp -s "$build.new/.config" "$build/.config" 2>/dev/null; then
    mkdir -p "$build"
    cp "$build.new/.config" "$build/.config"
fi
rm -rf "$build.new"
mkdir -p "$image.tmp"
echo "build.sh: building $name ($key) with -j$jobs; log in ${image#"$top"/}.tmp/build.log" >&2
start=$(date +%s)
load=$(cut -d' ' -f1 /proc/loadavg)
# The make's CPU time (its children's user + system), which the host's other load does not
# inflate the way it inflates the wall time.
cpu0=$(awk '{print $16 + $17}' /proc/$$/stat)
if ! nice -n 19 make -C "$tree" O="$build" ARCH=x86_64 -j"$jobs" bzImage > "$image.tmp/build.log" 2>&1; then
    tail -30 "$image.tmp/build.log" >&2
    echo "build.sh: the build failed (log: $image.tmp/build.log)" >&2
    exit 1
fi
secs=$(( $(date +%s) - start ))
cpu_secs=$(( ($(awk '{print $16 + $17}' /proc/$$/stat) - cpu0) / $(getconf CLK_TCK) ))
cp "$build/arch/x86/boot/bzImage" "$build/.config" "$build/System.map" "$image.tmp/"
{
    echo "name=$name"
    echo "source=linux-source-$source $version"
    echo "release=$(cat "$build/include/config/kernel.release")"
    echo "build_seconds=$secs"
    echo "build_cpu_seconds=$cpu_secs"
    echo "loadavg_at_start=$load loadavg_at_end=$(cut -d' ' -f1 /proc/loadavg)"
    echo "jobs=$jobs"
    for p in "${patches[@]}"; do echo "patch=${p#"$top"/}"; done
} > "$image.tmp/info"
rm -rf "$image"
mv "$image.tmp" "$image"
echo "build.sh: built $name in $secs s ($cpu_secs s of CPU)" >&2
echo "$image/bzImage"
