#!/usr/bin/env bash
# The LXC deployment, end to end, in a real container: creates a Debian 12 container from
# the Debian mirror, runs deploy/lxc/deploy.sh with the build's binaries (--binaries), and
# checks what an operator would: the service active as user tessera, /ready and a
# completion from the host, two re-runs that change nothing (same MainPID), and a
# `systemctl stop` that drains streams in flight to [DONE] with exit status 0. Destroys the
# container (and the LXC network, when it started it) at the end, whatever happened.
#
#   tests/deploy/lxc_e2e.sh BIN_DIR [MIRROR]
#
# BIN_DIR holds tesserad, tessera-worker and tessera; MIRROR defaults to
# http://deb.debian.org/debian. Exits 77 (skipped, with the reason) where the host cannot
# run LXC system containers: not root, lxc/debootstrap not installable, no container
# network, a container that cannot be created or does not boot systemd. Prints the time of
# each phase.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:?usage: lxc_e2e.sh BIN_DIR [MIRROR]}"
mirror="${2:-http://deb.debian.org/debian}"
name="tessera-e2e-$$"
port=8080
started_net=0
created=0
work="$(mktemp -d)"

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
phase_start=${SECONDS}
phase() {
  echo "[e2e] $* (after $((SECONDS - phase_start)) s)"
}

# lxc-attach makes its standard input, output and error mode 0700 when they are files or
# pipes: give it /dev/null and pipes only (deploy.sh does the same).
in_ct() { lxc-attach -n "${name}" -- "$@" </dev/null 2> >(cat >&2) | cat; }

cleanup() {
  set +e
  if [[ ${created} -eq 1 ]]; then
    lxc-stop -n "${name}" -k >/dev/null 2>&1
    lxc-destroy -n "${name}" >/dev/null 2>&1
  fi
  if [[ ${started_net} -eq 1 ]]; then /usr/libexec/lxc/lxc-net stop >/dev/null 2>&1; fi
  rm -rf "${work}"
}
trap cleanup EXIT

# --- can this host run a system container? ---
[[ "$(id -u)" -eq 0 ]] || skip "needs root (LXC system containers)"
for b in tesserad tessera-worker tessera; do
  [[ -x "${bin}/${b}" ]] || fail "${bin}/${b} is not an executable: build first"
done
if ! command -v lxc-create >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    lxc debootstrap dnsmasq-base nftables >"${work}/apt.log" 2>&1 ||
    skip "lxc and debootstrap are not installable here: $(tail -n 1 "${work}/apt.log")"
fi
bridge="$(awk -F' *= *' '$1 == "lxc.net.0.link" {print $2}' /etc/lxc/default.conf | tail -1)"
bridge="${bridge:-lxcbr0}"
if ! ip link show dev "${bridge}" >/dev/null 2>&1; then
  if [[ -x /usr/libexec/lxc/lxc-net ]] && /usr/libexec/lxc/lxc-net start >"${work}/net.log" 2>&1 &&
    ip link show dev "${bridge}" >/dev/null 2>&1; then
    started_net=1
  else
    skip "no container network: the bridge ${bridge} is missing and lxc-net could not start it"
  fi
fi
# lxc-net's bridge without its dnsmasq (a host restored from a snapshot keeps the bridge and
# /run/lxc/network_up, not the process) gives containers no address: restart it.
if [[ "${bridge}" == lxcbr0 && -f /run/lxc/network_up ]] &&
  ! kill -0 "$(cat /run/lxc/dnsmasq.pid 2>/dev/null || echo 0)" 2>/dev/null; then
  echo "[e2e] lxc-net is marked up without its dnsmasq: restarting it"
  /usr/libexec/lxc/lxc-net stop >"${work}/net.log" 2>&1 || true
  /usr/libexec/lxc/lxc-net start >>"${work}/net.log" 2>&1 ||
    skip "lxc-net does not restart: $(tail -n 2 "${work}/net.log" | tr '\n' ' ')"
  started_net=1
fi
phase "creating container ${name} from ${mirror}"
created=1
if ! lxc-create -n "${name}" -t debian -- --release bookworm --arch amd64 --mirror "${mirror}" \
  >"${work}/create.log" 2>&1; then
  skip "this host cannot create an LXC container: $(tail -n 2 "${work}/create.log" | tr '\n' ' ')"
fi
lxc-start -n "${name}" >"${work}/start.log" 2>&1 ||
  skip "this host cannot start an LXC container: $(tail -n 2 "${work}/start.log" | tr '\n' ' ')"
booted=0
for _ in $(seq 1 60); do
  state="$(in_ct systemctl is-system-running 2>/dev/null || true)"
  if [[ "${state}" == running || "${state}" == degraded ]]; then
    booted=1
    break
  fi
  sleep 1
done
[[ ${booted} -eq 1 ]] || skip "systemd does not come up in a container on this host (state: ${state})"
phase "container up"

# deploy.sh installs the binaries' libraries from the mirror inside the container, so the
# container must reach it: a host whose bridge gets no DNS forwarding or NAT cannot run
# this test (that is the host's network, not the deployment).
mirror_host="$(sed -E 's#^https?://##; s#[/:].*$##' <<<"${mirror}")"
mirror_port="$(sed -nE 's#^https://.*#443#p; s#^http://[^/]*:([0-9]+).*#\1#p' <<<"${mirror}" | head -1)"
mirror_port="${mirror_port:-80}"
reached=""
for _ in $(seq 1 60); do
  if in_ct getent hosts "${mirror_host}" >/dev/null 2>&1; then
    reached=resolved
    if in_ct timeout 10 bash -c "exec 3<>/dev/tcp/${mirror_host}/${mirror_port}" 2>/dev/null; then
      reached=connected
      break
    fi
  fi
  sleep 2
done
if [[ "${reached}" != connected ]]; then
  ip="$(lxc-info -n "${name}" -iH 2>/dev/null | head -1 || true)"
  case "${reached}" in
    resolved) why="resolves ${mirror_host} but cannot connect to port ${mirror_port} (no NAT for the bridge?)" ;;
    *) why="cannot resolve ${mirror_host} (address: ${ip:-none}; the bridge's DNS does not forward?)" ;;
  esac
  skip "the container cannot reach the mirror ${mirror}: it ${why}"
fi
phase "container reaches ${mirror_host}:${mirror_port}"

# --- the deployment ---
deploy=("${src}/deploy/lxc/deploy.sh" --name "${name}" --binaries "${bin}" --http-port "${port}"
  --template debian --mirror "${mirror}" --ready-timeout 300)
"${deploy[@]}" >"${work}/deploy1.log" 2>&1 || {
  cat "${work}/deploy1.log" >&2
  fail "the first deploy.sh run failed"
}
phase "deployed"
[[ "$(in_ct systemctl is-active tesserad)" == active ]] || fail "tesserad is not active"
main_pid="$(in_ct systemctl show -p MainPID --value tesserad)"
user="$(in_ct ps -o user= -p "${main_pid}" | tr -d ' ')"
[[ "${user}" == tessera ]] || fail "tesserad runs as '${user}', not tessera"
# Nothing of a development toolchain in the production container.
for p in g++ cmake libgrpc++-dev prometheus; do
  # shellcheck disable=SC2016 # dpkg-query's format
  if in_ct dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q 'install ok installed'; then
    fail "the container has the build/test package ${p}"
  fi
done
ip="$(lxc-info -n "${name}" -iH | head -1)"
[[ -n "${ip}" ]] || fail "the container has no IPv4 address"
curl -fsS "http://${ip}:${port}/ready" >/dev/null || fail "/ready from the host"
completion="$(curl -fsS "http://${ip}:${port}/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Hello", "max_tokens": 8}')" || fail "a completion from the host"
grep -q '"finish_reason"' <<<"${completion}" || fail "the completion has no choice: ${completion}"
phase "service checked: active as tessera (MainPID ${main_pid}), /ready and a completion from the host"

# --- re-runs change nothing ---
for run in 2 3; do
  "${deploy[@]}" >"${work}/deploy${run}.log" 2>&1 || {
    cat "${work}/deploy${run}.log" >&2
    fail "deploy.sh run ${run} failed"
  }
  if grep -E '^  (updated|installing)|restarting' "${work}/deploy${run}.log"; then
    fail "deploy.sh run ${run} changed something (lines above)"
  fi
  pid="$(in_ct systemctl show -p MainPID --value tesserad)"
  [[ "${pid}" == "${main_pid}" ]] || fail "run ${run} restarted tesserad (MainPID ${main_pid} -> ${pid})"
done
phase "two re-runs: no change, same MainPID"

# --- a stop drains the streams in flight ---
for i in 1 2 3 4; do
  curl -sN "http://${ip}:${port}/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "Once", "max_tokens": 4000, "stream": true, "ignore_eos": true}' \
    >"${work}/stream${i}.txt" 2>/dev/null &
done
for _ in $(seq 1 100); do
  [[ -s "${work}/stream1.txt" ]] && break
  sleep 0.05
done
in_flight=0
for i in 1 2 3 4; do
  if ! grep -q '^data: \[DONE\]' "${work}/stream${i}.txt"; then in_flight=$((in_flight + 1)); fi
done
in_ct systemctl stop tesserad
wait
[[ ${in_flight} -gt 0 ]] || fail "every stream had finished before the stop: nothing was drained"
for i in 1 2 3 4; do
  grep -q '^data: \[DONE\]' "${work}/stream${i}.txt" || fail "stream ${i} did not end with [DONE]"
done
status="$(in_ct systemctl show -p ExecMainStatus --value tesserad)"
[[ "${status}" == 0 ]] || fail "tesserad exited with status ${status} on stop"
phase "systemctl stop drained ${in_flight} stream(s) in flight to [DONE], exit status 0"
echo "PASS: LXC deployment end to end in $((SECONDS - phase_start)) s"
