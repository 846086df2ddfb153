#!/usr/bin/env bash
# The README's two commands share one build: the configure step of ./run.sh and that of
# ./test.sh, run one after the other in one build directory (each order), leave what the
# first built up to date. Each command's configure line is taken from the script itself, so
# a flag added to one of them alone fails here. What is built between the configures is one
# C++ object and, where CUDA is on, one CUDA object (a changed CUDA architecture list
# recompiles every CUDA source); their modification times must not change.
# Usage: shared_configure_test.sh SOURCE_DIR. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
src=$(cd "${1:?usage: shared_configure_test.sh SOURCE_DIR}" && pwd)
for tool in cmake ninja; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done

# The line of SCRIPT that configures the default preset, without its output redirection.
configure_line() {
  local lines
  lines=$(grep -E '^[[:space:]]*cmake --preset default([[:space:]]|$)' "$src/$1" || true)
  if [ "$(wc -l <<<"$lines")" -ne 1 ] || [ -z "$lines" ]; then
    echo "FAIL: $1 should configure the default preset on exactly one line (found: '$lines')"
    exit 1
  fi
  sed -E 's/[[:space:]]*[0-9]?>[[:space:]]*\/dev\/null//g' <<<"$lines"
}
run_line=$(configure_line run.sh)
test_line=$(configure_line test.sh)
echo "run.sh configures with:  $run_line"
echo "test.sh configures with: $test_line"

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-shared-configure.XXXXXX")
trap 'rm -rf "$work"' EXIT
build="$work/build"
configure() {  # configure LINE: run it in $src against the scratch build directory.
  (cd "$src" && eval "$1 -B \"$build\"") >"$work/configure.log" 2>&1 || {
    echo "FAIL: '$1' failed:"; tail -20 "$work/configure.log"; exit 1; }
}
stamp() {  # modification times of the built objects, one line each
  for o in "${objects[@]}"; do stat -c '%Y.%y %n' "$build/$o"; done
}

configure "$run_line"
objects=()
mapfile -t all < <(ninja -C "$build" -t targets all | cut -d: -f1)
for pattern in '/tessera_cuda_host\.dir/launch_config\.cc\.o$' '/tessera_cuda\.dir/cuda_types\.cu\.o$'; do
  o=$(printf '%s\n' "${all[@]}" | grep -m1 -E "$pattern" || true)
  [ -n "$o" ] && objects+=("$o")
done
if [ ${#objects[@]} -eq 0 ]; then
  echo "FAIL: the build has none of the objects this test builds (launch_config.cc.o)"
  exit 1
fi
grep -q 'CMAKE_CUDA_COMPILER:' "$build/CMakeCache.txt" && grep -q 'TESSERA_CUDA_ARCHS' "$build/CMakeCache.txt" &&
  echo "CUDA architectures: $(grep '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" | cut -d= -f2)"
ninja -C "$build" "${objects[@]}" >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
before=$(stamp)
echo "built: ${objects[*]}"

fail=0
for step in "test.sh:$test_line" "run.sh:$run_line" "test.sh:$test_line"; do
  configure "${step#*:}"
  ninja -C "$build" "${objects[@]}" >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
  after=$(stamp)
  if [ "$after" != "$before" ]; then
    echo "FAIL: after the configure of ${step%%:*}, ninja rebuilt objects the previous configure had built:"
    diff <(echo "$before") <(echo "$after") || true
    fail=1
    before=$after
  else
    echo "ok: the configure of ${step%%:*} left the build up to date"
  fi
done
exit $fail
