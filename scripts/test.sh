#!/usr/bin/env bash
# Builds everything and runs every test that is not labelled `gpu`
# (GPU tests skip themselves without a device anyway). Safe to run twice.
# Usage: scripts/test.sh [preset]   (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/build.sh "$preset"
ctest --test-dir "build/$preset" --output-on-failure -j "$(nproc)" -LE gpu
