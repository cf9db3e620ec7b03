#!/usr/bin/env bash
# Builds the frame decoder's libFuzzer target with clang in a separate build
# folder and runs it for a bounded time from a seed corpus of valid frames.
# Exits non-zero if the fuzzer finds a crash, a sanitizer report or a leak;
# 77 (CTest: skipped) when clang or the libFuzzer runtime is missing.
#
# Usage: run_fuzz.sh SOURCE_DIR BUILD_DIR MAKE_CORPUS_EXE [SECONDS]
set -euo pipefail

src=$1
build=$2
make_corpus=$3
seconds=${4:-20}

clangxx=$(command -v clang++ || true)
clang=$(command -v clang || true)
if [ -z "$clangxx" ] || [ -z "$clang" ]; then
  echo "run_fuzz: clang++ not found; skipping (scripts/install-deps.sh installs it)"
  exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     "$clangxx" -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "run_fuzz: clang has no libFuzzer runtime (libclang-rt-dev); skipping"
  exit 77
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$src/tests/transport/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$clang" -DCMAKE_CXX_COMPILER="$clangxx" >/dev/null
fi
nice cmake --build "$build" -j2

rm -rf "$build/seeds" "$build/corpus" "$build/artifacts"
mkdir -p "$build/corpus" "$build/artifacts"
"$make_corpus" "$build/seeds"
cp "$build/seeds"/* "$build/corpus/"

# A fixed seed: the same run explores the same inputs. -rss_limit_mb and
# -malloc_limit_mb catch allocation blow-ups (an amplification bug shows as
# an out-of-memory finding); -timeout catches hangs.
set +e
"$build/frame_fuzz" -seed=1 -max_total_time="$seconds" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" "$build/corpus" >"$build/fuzz.log" 2>&1
status=$?
set -e
grep -E '^(INFO: Seed|#[0-9]+\s+(INITED|DONE))|^stat::|ERROR|SUMMARY' "$build/fuzz.log" || true
if [ "$status" -ne 0 ] || [ -n "$(ls -A "$build/artifacts")" ]; then
  tail -n 60 "$build/fuzz.log"
  echo "run_fuzz: FAILED (exit $status); reproducers in $build/artifacts:"
  ls -l "$build/artifacts"
  exit 1
fi
echo "run_fuzz: no crashes in ${seconds} s"
