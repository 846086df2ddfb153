#!/usr/bin/env bash
# Installs, from Debian 12's archive only, the packages Tessera needs to build, test and run;
# with --build-only, just what building tesserad, tessera-worker and tessera takes.
# Idempotent: installs only what is missing, and does nothing (not even `apt-get update`)
# when everything is present. Needs root (or sudo) only when something is missing.
set -euo pipefail

# What a Release build of the three binaries needs (deploy/lxc/deploy.sh installs only
# these in a container that builds, and removes them afterwards).
build_packages=(
  build-essential cmake ninja-build pkg-config git
  libabsl-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libgloo-dev nlohmann-json3-dev libyaml-cpp-dev libpcre2-dev libboost-dev prometheus-cpp-dev
)
packages=(
  "${build_packages[@]}"
  # development toolchain: the cache, the sanitize preset (clang), formatting and lints
  ccache clang lld libclang-rt-14-dev clang-format clang-tidy
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # test tools: promtool (Prometheus), the float64 reference (numpy), grpcurl-style clients,
  # an independent JSON Schema validator for the structured-output grammars
  prometheus python3 python3-numpy curl python3-grpcio python3-protobuf python3-jsonschema
  # deploy checks: shellcheck on the scripts, systemd-analyze verify on the unit
  shellcheck systemd
)
case "${1:-}" in
  "") ;;
  --build-only) packages=("${build_packages[@]}") ;;
  *)
    echo "usage: install-deps.sh [--build-only]" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# --no-install-recommends keeps the prometheus server's recommends (node exporter etc.) out.
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
