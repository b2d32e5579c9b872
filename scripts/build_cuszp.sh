#!/usr/bin/env bash
# Build cuSZp (github.com/szcompressor/cuSZp, BSD-3) from a source checkout into
# libcuSZp.so for the GPU of this machine, where perfscout's `cuszp` backend finds it.
#
#   scripts/build_cuszp.sh SOURCE_DIR [PREFIX]
#
# PREFIX defaults to $PERFSCOUT_HOME/cuszp (perfscout's home: $PERFSCOUT_HOME, else the per-user
# data directory, ~/.local/share/perfscout on Linux); the library lands in
# PREFIX/lib/libcuSZp.so with PREFIX/lib/libcuSZp.so.json beside it (the architectures it
# was built for, the source commit, nvcc's version), which perfscout reads to say exactly
# why a library cannot run on a GPU. Point PERFSCOUT_CUSZP_LIB at the .so to use another.
#
# cuSZp's CMakeLists pins CMAKE_CUDA_ARCHITECTURES to 60..86 with a plain set(), which
# overrides -D on the command line (and CUDA 13's nvcc no longer accepts sm_60..72). So the
# source is copied into the build folder and that one line is rewritten there; the
# checkout itself is never modified. The architecture is the local GPU's compute
# capability (nvidia-smi), or CUSZP_ARCH (e.g. "90", "80;90") when given.
set -euo pipefail

usage() { echo "usage: $0 SOURCE_DIR [PREFIX]   (env: CUSZP_ARCH, CUDACXX, JOBS)" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "error: source folder $1 does not exist" >&2; exit 2; }
[ -f "$SRC/CMakeLists.txt" ] && [ -f "$SRC/include/cuSZp.h" ] || {
  echo "error: $SRC is not a cuSZp checkout (no CMakeLists.txt / include/cuSZp.h)" >&2; exit 2; }
PREFIX=${2:-${PERFSCOUT_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/perfscout}/cuszp}
mkdir -p "$PREFIX/lib"
PREFIX=$(cd "$PREFIX" && pwd)

command -v cmake >/dev/null || { echo "error: cmake is not on PATH" >&2; exit 2; }
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "error: nvcc not found (set CUDACXX or put nvcc on PATH)" >&2; exit 2; }

ARCH=${CUSZP_ARCH:-}
if [ -z "$ARCH" ]; then
  command -v nvidia-smi >/dev/null || { echo "error: no nvidia-smi to detect the GPU; set CUSZP_ARCH (e.g. 90)" >&2; exit 2; }
  # one capability per GPU, e.g. "9.0"; build for each distinct one
  ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d ' .' | sort -u | paste -sd ';')
fi
case "$ARCH" in ''|*[!0-9\;]*) echo "error: bad architecture list '$ARCH' (want e.g. 90 or 80;90)" >&2; exit 2;; esac

BUILD=$PREFIX/build
rm -rf "$BUILD" && mkdir -p "$BUILD"
cp -r "$SRC" "$BUILD/src"
# the one line that pins old architectures, in the copy only
sed -i -E "s/^[[:space:]]*set\(CMAKE_CUDA_ARCHITECTURES[^)]*\)/set(CMAKE_CUDA_ARCHITECTURES ${ARCH})/" "$BUILD/src/CMakeLists.txt"
grep -q "set(CMAKE_CUDA_ARCHITECTURES ${ARCH})" "$BUILD/src/CMakeLists.txt" || {
  echo "error: could not find cuSZp's set(CMAKE_CUDA_ARCHITECTURES ...) line to retarget" >&2; exit 1; }

echo "building cuSZp from $SRC for sm_${ARCH//;/, sm_} with $NVCC" >&2
cmake -S "$BUILD/src" -B "$BUILD/cmake" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
      -DcuSZp_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared \
      -DCMAKE_INSTALL_PREFIX="$PREFIX" >"$BUILD/cmake.log" 2>&1 || { tail -30 "$BUILD/cmake.log" >&2; exit 1; }
cmake --build "$BUILD/cmake" --target cuSZp_shared -j "${JOBS:-$(nproc)}" >"$BUILD/build.log" 2>&1 || {
  tail -40 "$BUILD/build.log" >&2; exit 1; }
LIB=$(find "$BUILD/cmake" -name 'libcuSZp.so*' -type f | head -1)
[ -n "$LIB" ] || { echo "error: the build produced no libcuSZp.so (see $BUILD/build.log)" >&2; exit 1; }
cp "$LIB" "$PREFIX/lib/libcuSZp.so"

COMMIT=${CUSZP_COMMIT:-$( [ -e "$SRC/.git" ] && git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)}
NVCC_VERSION=$("$NVCC" --version | tail -1)
cat >"$PREFIX/lib/libcuSZp.so.json" <<EOF
{"library": "libcuSZp.so", "cuda_architectures": "$ARCH", "source": "$SRC", "commit": "$COMMIT",
 "nvcc": "$NVCC_VERSION", "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF
echo "$PREFIX/lib/libcuSZp.so"
