#!/usr/bin/env bash
# Deploys Tessera into an LXC container (Debian 12) on this host, CPU-only or with NVIDIA
# GPUs passed through, and starts tesserad under systemd inside it.
#
#   sudo deploy/lxc/deploy.sh --name tessera --gpus 0,1,2,3,4,5,6,7 \
#        --model-dir /srv/models/GLM-5 --model GLM-5-UD-Q4_K_XL-00001-of-00010.gguf \
#        --api-key-file /root/tessera-api-key
#
# Idempotent: every action first looks at what is there and does nothing when it already
# matches, so a second run changes nothing. --dry-run prints the numbered action list
# (`[action] NN KIND details`, one per line) and touches nothing; it needs neither LXC
# nor a GPU driver, so the plan can be read on any machine.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "${SCRIPT_DIR}/../.." && pwd)"
readonly SCRIPT_DIR REPO_DIR

name="tessera"
gpus="none"
model_dir=""
model=""
http_port=8080
grpc_port=50051
api_key_file=""
dry_run=0
ready_timeout=900
network_timeout=120
template=""
mirror=""
binaries=""

usage() {
  cat <<EOF
usage: deploy.sh [OPTIONS]

Creates or updates the LXC container NAME (Debian 12), passes NVIDIA GPUs through (or
runs CPU-only), bind-mounts the model directory read-only at /models, installs Tessera
inside (prebuilt binaries with --binaries, or built from this checkout's tracked files),
writes /etc/tessera/tesserad.yaml, installs and starts the tesserad systemd unit, waits for
/ready and prints the endpoints. The container keeps only what the binaries need at run
time: a build's compilers and -dev packages are removed once it is done.

  --name NAME           container name [${name}]
  --gpus LIST|none      GPU indexes to pass through, e.g. 0,1,2,3, or none for CPU only
                        (tp = number of GPUs; CPU: one worker) [${gpus}]
  --model-dir DIR       host directory holding the model, mounted read-only at /models
  --model FILE          model file inside --model-dir (any part of a split set); without
                        --model-dir/--model the embedded default model is served
  --http-port PORT      REST port inside the container [${http_port}]
  --grpc-port PORT      gRPC port inside the container [${grpc_port}]
  --api-key-file FILE   file holding the API key clients must send (copied to
                        /etc/tessera/api-key, mode 0640)
  --ready-timeout SECS  how long to wait for /ready (large models load for minutes) [${ready_timeout}]
  --network-timeout SECS
                        how long to wait, after the container starts, until it resolves
                        its package mirror's host [${network_timeout}]
  --template download|debian
                        how the container's Debian 12 is made: download fetches a prebuilt
                        image from images.linuxcontainers.org; debian bootstraps it from a
                        Debian mirror (debootstrap), for hosts that reach only a mirror
                        [download; debian when --mirror is given]
  --mirror URL          the Debian mirror for --template debian [http://deb.debian.org/debian]
  --binaries DIR        install the prebuilt tesserad, tessera-worker and tessera from DIR
                        (e.g. build/default/bin) instead of building in the container; their
                        libraries come from the container's Debian packages, and libraries
                        no package provides (CUDA's) are copied from this host
  --dry-run             print the numbered action list and change nothing
  --help                this text

Needs root, lxc (lxc-create, lxc-attach, lxc-info, lxc-start; debootstrap for
--template debian), the container network's bridge (lxcbr0 from lxc-net by default) and,
for GPUs, the NVIDIA driver on the host (nvidia-smi, /dev/nvidia*).
EOF
}

die() {
  echo "deploy.sh: $*" >&2
  exit 1
}

usage_error() {
  echo "deploy.sh: $*" >&2
  echo "run deploy.sh --help for the options" >&2
  exit 2
}

need_value() {
  [[ $# -ge 2 && -n "$2" ]] || usage_error "$1 needs a value"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) need_value "$@"; name="$2"; shift 2 ;;
    --gpus) need_value "$@"; gpus="$2"; shift 2 ;;
    --model-dir) need_value "$@"; model_dir="$2"; shift 2 ;;
    --model) need_value "$@"; model="$2"; shift 2 ;;
    --http-port) need_value "$@"; http_port="$2"; shift 2 ;;
    --grpc-port) need_value "$@"; grpc_port="$2"; shift 2 ;;
    --api-key-file) need_value "$@"; api_key_file="$2"; shift 2 ;;
    --ready-timeout) need_value "$@"; ready_timeout="$2"; shift 2 ;;
    --network-timeout) need_value "$@"; network_timeout="$2"; shift 2 ;;
    --template) need_value "$@"; template="$2"; shift 2 ;;
    --mirror) need_value "$@"; mirror="$2"; shift 2 ;;
    --binaries) need_value "$@"; binaries="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --help | -h) usage; exit 0 ;;
    *) usage_error "unknown option '$1'" ;;
  esac
done

# --- validate the options (before anything happens) ---
[[ "${name}" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || usage_error "--name '${name}': letters, digits, . _ - only"
for port_var in http_port grpc_port; do
  port="${!port_var}"
  [[ "${port}" =~ ^[0-9]+$ && "${port}" -ge 1 && "${port}" -le 65535 ]] ||
    usage_error "--${port_var//_/-} '${port}' is not a port (1-65535)"
done
[[ "${http_port}" != "${grpc_port}" ]] || usage_error "--http-port and --grpc-port are both ${http_port}"
[[ "${ready_timeout}" =~ ^[0-9]+$ ]] || usage_error "--ready-timeout '${ready_timeout}' is not a number of seconds"
[[ "${network_timeout}" =~ ^[0-9]+$ ]] || usage_error "--network-timeout '${network_timeout}' is not a number of seconds"
gpu_list=()
if [[ "${gpus}" != "none" ]]; then
  IFS=',' read -r -a gpu_list <<<"${gpus}"
  [[ ${#gpu_list[@]} -gt 0 ]] || usage_error "--gpus: give indexes like 0,1 or none"
  for g in "${gpu_list[@]}"; do
    [[ "${g}" =~ ^[0-9]+$ ]] || usage_error "--gpus: '${g}' is not a GPU index (0, 1, ...)"
  done
fi
if [[ -n "${model}" && -z "${model_dir}" ]]; then usage_error "--model needs --model-dir"; fi
if [[ -n "${model_dir}" && -z "${model}" ]]; then usage_error "--model-dir needs --model"; fi
[[ "${model}" != /* && "${model}" != *..* ]] || usage_error "--model is a file inside --model-dir, not a path ('${model}')"
if [[ -z "${template}" ]]; then
  template=download
  if [[ -n "${mirror}" ]]; then template=debian; fi
fi
[[ "${template}" == download || "${template}" == debian ]] ||
  usage_error "--template '${template}': expected download or debian"
if [[ -n "${mirror}" && "${template}" != debian ]]; then
  usage_error "--mirror is for --template debian (download fetches images.linuxcontainers.org)"
fi
[[ -z "${mirror}" || "${mirror}" =~ ^(https?|file)://[^[:space:]]+$ ]] ||
  usage_error "--mirror '${mirror}' is not a URL (http://..., https://... or file://...)"
mirror="${mirror:-http://deb.debian.org/debian}"
readonly binary_names=(tesserad tessera-worker tessera)

# --- host prerequisites: every problem is reported at once ---
problems=()
if [[ -n "${model_dir}" ]]; then
  [[ -d "${model_dir}" ]] || problems+=("--model-dir ${model_dir}: not a directory")
  [[ -f "${model_dir}/${model}" ]] || problems+=("--model ${model}: no such file in ${model_dir}")
  model_dir="$(cd "${model_dir}" 2>/dev/null && pwd || echo "${model_dir}")"
fi
if [[ -n "${api_key_file}" && ! -r "${api_key_file}" ]]; then
  problems+=("--api-key-file ${api_key_file}: not readable")
fi
command -v git >/dev/null 2>&1 || problems+=("git not found: the source is copied from this checkout's files")
missing_lxc=()
for tool in lxc-create lxc-attach lxc-info lxc-start lxc-stop lxc-config; do
  command -v "${tool}" >/dev/null 2>&1 || missing_lxc+=("${tool}")
done
if [[ ${#missing_lxc[@]} -gt 0 ]]; then
  problems+=("LXC is not installed (${missing_lxc[*]} not found): apt-get install lxc")
fi
if [[ ${#gpu_list[@]} -gt 0 ]]; then
  command -v nvidia-smi >/dev/null 2>&1 ||
    problems+=("GPUs were asked (--gpus ${gpus}) but nvidia-smi is not found: install the NVIDIA driver on the host, or use --gpus none")
  [[ -e /dev/nvidiactl ]] ||
    problems+=("GPUs were asked (--gpus ${gpus}) but /dev/nvidiactl does not exist: the NVIDIA kernel driver is not loaded")
  for g in "${gpu_list[@]}"; do
    [[ -e "/dev/nvidia${g}" ]] || problems+=("GPU ${g} was asked but /dev/nvidia${g} does not exist")
  done
fi
if [[ -n "${binaries}" ]]; then
  if [[ ! -d "${binaries}" ]]; then
    problems+=("--binaries ${binaries}: not a directory")
  else
    binaries="$(cd "${binaries}" && pwd)"
    for b in "${binary_names[@]}"; do
      if [[ ! -x "${binaries}/${b}" ]]; then
        problems+=("--binaries ${binaries}: no executable ${b} (build it: cmake --build --preset default)")
      else
        missing_libs="$({ ldd "${binaries}/${b}" 2>/dev/null || true; } | awk '/not found/ {print $1}' | tr '\n' ' ')"
        if [[ -n "${missing_libs}" ]]; then
          problems+=("--binaries: ${b} needs libraries this host lacks: ${missing_libs}")
        fi
      fi
    done
  fi
fi
if [[ "${template}" == debian ]] && ! command -v debootstrap >/dev/null 2>&1; then
  problems+=("--template debian needs debootstrap: apt-get install debootstrap")
fi
if [[ ${#missing_lxc[@]} -eq 0 ]]; then
  # The container's network: the bridge its veth joins must exist before it starts.
  lxc_path="$(lxc-config lxc.lxcpath)"
  container_exists=0
  if lxc-info -n "${name}" >/dev/null 2>&1; then container_exists=1; fi
  net_cfg=/etc/lxc/default.conf
  if [[ ${container_exists} -eq 1 ]]; then net_cfg="${lxc_path}/${name}/config"; fi
  net_type="$(awk -F' *= *' '$1 == "lxc.net.0.type" {print $2}' "${net_cfg}" 2>/dev/null | tail -1)"
  bridge="$(awk -F' *= *' '$1 == "lxc.net.0.link" {print $2}' "${net_cfg}" 2>/dev/null | tail -1)"
  if [[ "${net_type}" == veth && -n "${bridge}" ]] && ! ip link show dev "${bridge}" >/dev/null 2>&1; then
    problems+=("the container network's bridge ${bridge} (lxc.net.0.link in ${net_cfg}) does not exist: start LXC's network (systemctl start lxc-net, or /usr/libexec/lxc/lxc-net start where systemd does not run) or set lxc.net.0.link to an existing bridge")
  fi
  # lxc-net's bridge hands out addresses and answers DNS through its dnsmasq; a bridge left
  # up without it (a host restored from a snapshot, a killed dnsmasq) gives containers no
  # address.
  lxcnet_bridge="$(sed -nE 's/^LXC_BRIDGE="?([^"]*)"?$/\1/p' /etc/default/lxc-net 2>/dev/null | tail -1)"
  if [[ "${net_type}" == veth && "${bridge}" == "${lxcnet_bridge:-lxcbr0}" && -f /run/lxc/network_up ]] &&
    ! kill -0 "$(cat /run/lxc/dnsmasq.pid 2>/dev/null || echo 0)" 2>/dev/null; then
    problems+=("LXC's network is marked up but its DHCP/DNS server for ${bridge} (dnsmasq, /run/lxc/dnsmasq.pid) is not running, so the container would get no address: restart it (systemctl restart lxc-net, or /usr/libexec/lxc/lxc-net stop && /usr/libexec/lxc/lxc-net start)")
  fi
  # Room for the container: a Debian base and the runtime libraries, or a whole build.
  need_mib=2048
  if [[ -z "${binaries}" ]]; then need_mib=6144; fi
  if [[ ${container_exists} -eq 1 ]]; then need_mib=$((need_mib / 2)); fi
  free_mib="$(df -Pm "$(dirname "${lxc_path}/x")" 2>/dev/null | awk 'NR == 2 {print $4}')"
  if [[ -n "${free_mib}" && "${free_mib}" -lt "${need_mib}" ]]; then
    problems+=("${lxc_path} has ${free_mib} MiB free; the container needs about ${need_mib} MiB")
  fi
fi
# GPU device rules: cgroup2 (lxc.cgroup2.*) or the legacy devices controller (lxc.cgroup.*).
cgroup_keys=""
if [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" == cgroup2fs ]]; then
  cgroup_keys=lxc.cgroup2
elif [[ -d /sys/fs/cgroup/devices ]]; then
  cgroup_keys=lxc.cgroup
fi
if [[ ${#gpu_list[@]} -gt 0 && -z "${cgroup_keys}" ]]; then
  problems+=("GPUs were asked but this host has neither cgroup2 nor cgroup v1's devices controller at /sys/fs/cgroup: LXC cannot allow the container the GPU devices")
fi
if [[ ${dry_run} -eq 0 && "$(id -u)" -ne 0 ]]; then
  problems+=("needs root (LXC system containers): run with sudo")
fi
if [[ ${#problems[@]} -gt 0 ]]; then
  if [[ ${dry_run} -eq 1 ]]; then
    for p in "${problems[@]}"; do echo "[warning] ${p}" >&2; done
  else
    for p in "${problems[@]}"; do echo "deploy.sh: ${p}" >&2; done
    exit 1
  fi
fi

# --- what the container gets ---
tp=1
if [[ ${#gpu_list[@]} -gt 0 ]]; then tp=${#gpu_list[@]}; fi
container_model=""
if [[ -n "${model}" ]]; then container_model="/models/${model}"; fi

config_yaml() {
  echo "# Written by deploy/lxc/deploy.sh; options: docs/configuration.md"
  if [[ -n "${container_model}" ]]; then echo "model: ${container_model}"; fi
  echo "host: 0.0.0.0"
  echo "http-port: ${http_port}"
  echo "grpc-port: ${grpc_port}"
  if [[ -n "${api_key_file}" ]]; then echo "api-key-file: /etc/tessera/api-key"; fi
  if [[ ${#gpu_list[@]} -gt 0 ]]; then
    echo "tp: ${tp}"
    # Inside the container the passed-through GPUs are numbered from 0.
    echo "gpus: [$(seq -s ', ' 0 $((tp - 1)))]"
  else
    echo "cpu-workers: 1"
  fi
  echo "log-format: json"
}

# --- the action runner ---
action_no=0
changed=0

# action KIND DETAILS... ; the body follows as a function named do_KIND.
action() {
  local kind="$1"
  shift
  action_no=$((action_no + 1))
  printf '[action] %02d %s %s\n' "${action_no}" "${kind}" "$*"
  if [[ ${dry_run} -eq 0 ]]; then
    "do_${kind//-/_}" "$@"
  fi
}

# lxc-attach makes its standard input, output and error mode 0700 when they are files or
# pipes (LXC 5.0), so it is only ever given /dev/null and pipes, never a file of this host
# (a binary, the unit, the operator's log): in_ct reads nothing, in_ct_input reads stdin
# through a pipe.
in_ct() { lxc-attach -n "${name}" -- "$@" </dev/null 2> >(cat >&2) | cat; }
in_ct_input() { cat | lxc-attach -n "${name}" -- "$@" 2> >(cat >&2) | cat; }

lxc_config_path() { echo "$(lxc-config lxc.lxcpath)/${name}/config"; }

# Appends LINE to the container's config unless it is there; marks the container changed.
ensure_config_line() {
  local line="$1" cfg
  cfg="$(lxc_config_path)"
  if ! grep -qxF -- "${line}" "${cfg}"; then
    echo "${line}" >>"${cfg}"
    config_changed=1
  fi
}

# Writes stdin to PATH inside the container only when the content differs.
push_file() {
  local path="$1" mode="$2" tmp
  tmp="$(mktemp)"
  cat >"${tmp}"
  install_file "${tmp}" "${path}" "${mode}"
  rm -f "${tmp}"
}

# Copies FILE to PATH inside the container with MODE when the content differs (compared by
# sha256 on both sides, so an unchanged large file is not sent again).
install_file() {
  local file="$1" path="$2" mode="$3" want have
  want="$(sha256sum <"${file}" | cut -d' ' -f1)"
  have="$(in_ct sha256sum "${path}" 2>/dev/null | cut -d' ' -f1 || true)"
  if [[ "${want}" != "${have}" ]]; then
    in_ct mkdir -p "$(dirname "${path}")"
    in_ct_input sh -c "cat > '${path}.new' && chmod ${mode} '${path}.new' && mv '${path}.new' '${path}'" <"${file}"
    changed=1
    echo "  updated ${path}"
  fi
}

config_changed=0

do_create_container() {
  if lxc-info -n "${name}" >/dev/null 2>&1; then
    echo "  exists"
  elif [[ "${template}" == debian ]]; then
    lxc-create -n "${name}" -t debian -- --release bookworm --arch amd64 --mirror "${mirror}" ||
      die "lxc-create from the Debian mirror ${mirror} failed (output above)"
  elif ! lxc-create -n "${name}" -t download -- --dist debian --release bookworm --arch amd64; then
    lxc-destroy -n "${name}" >/dev/null 2>&1 || true
    die "the download template could not fetch Debian 12 from images.linuxcontainers.org (output above); on a host that reaches only a Debian mirror, run again with --template debian --mirror URL"
  fi
}

do_configure_container() {
  ensure_config_line "lxc.start.auto = 1"
  # systemd's sandboxing (ProtectSystem, PrivateTmp, ...) needs nested mount namespaces.
  ensure_config_line "lxc.include = /usr/share/lxc/config/nesting.conf"
}

do_bind_model_dir() {
  ensure_config_line "lxc.mount.entry = ${model_dir} models none bind,ro,create=dir 0 0"
}

do_gpu_passthrough() {
  # Allow the NVIDIA character devices (major 195: nvidia*, nvidiactl; the uvm major is
  # dynamic) under the host's cgroup version (preflight: cgroup_keys), and mount the
  # device nodes.
  ensure_config_line "${cgroup_keys}.devices.allow = c 195:* rwm"
  local uvm_major
  uvm_major="$(awk '$2 == "nvidia-uvm" {print $1}' /proc/devices)"
  if [[ -n "${uvm_major}" ]]; then
    ensure_config_line "${cgroup_keys}.devices.allow = c ${uvm_major}:* rwm"
  fi
  local dev
  for dev in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools; do
    if [[ -e "${dev}" ]]; then
      ensure_config_line "lxc.mount.entry = ${dev} ${dev#/} none bind,optional,create=file"
    fi
  done
  for g in "${gpu_list[@]}"; do
    ensure_config_line "lxc.mount.entry = /dev/nvidia${g} dev/nvidia${g} none bind,optional,create=file"
  done
}

do_gpu_driver() {
  # The container needs the host driver's user-space libraries (libcuda, libnvidia-ml) of
  # exactly the host's version; LXC's nvidia hook (libnvidia-container-tools) mounts them.
  if [[ -x /usr/share/lxc/hooks/nvidia ]] && command -v nvidia-container-cli >/dev/null 2>&1; then
    ensure_config_line "lxc.environment = NVIDIA_VISIBLE_DEVICES=${gpus}"
    ensure_config_line "lxc.environment = NVIDIA_DRIVER_CAPABILITIES=compute,utility"
    ensure_config_line "lxc.hook.mount = /usr/share/lxc/hooks/nvidia"
  else
    echo "  warning: nvidia-container-cli or LXC's nvidia hook not found; install the driver's" \
      "user-space libraries ($(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)) inside the container" >&2
  fi
}

do_start_container() {
  local state
  state="$(lxc-info -n "${name}" -sH 2>/dev/null || true)"
  if [[ "${state}" == "RUNNING" && ${config_changed} -eq 1 ]]; then
    echo "  configuration changed: restarting the container"
    lxc-stop -n "${name}"
    state="STOPPED"
  fi
  if [[ "${state}" != "RUNNING" ]]; then
    lxc-start -n "${name}"
  else
    echo "  running"
  fi
}

# The host name of the first http(s) mirror in the container's apt sources (deb.debian.org
# when none is found).
container_mirror_host() {
  local host
  host="$({ in_ct sh -c 'cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null' || true; } |
    grep -oE 'https?://[^/[:space:]]+' | head -1 | sed -E 's#^https?://##; s#:[0-9]+$##')"
  echo "${host:-deb.debian.org}"
}

# Why the container cannot resolve HOST, as far as one can tell from outside: no address
# (DHCP), no default route, no name server, or a name server that does not answer.
network_diagnosis() {
  local host="$1" ip routes ns
  ip="$(lxc-info -n "${name}" -iH 2>/dev/null | head -1 || true)"
  [[ -n "${ip}" ]] || {
    echo "it has no IPv4 address (DHCP on the bridge: is lxc-net's dnsmasq running?)"
    return
  }
  routes="$({ in_ct cat /proc/net/route 2>/dev/null || true; } | awk '$2 == "00000000"' | wc -l)"
  [[ "${routes}" -gt 0 ]] || {
    echo "it has the address ${ip} but no default route"
    return
  }
  ns="$({ in_ct cat /etc/resolv.conf 2>/dev/null || true; } | awk '$1 == "nameserver" {print $2}' | paste -sd, -)"
  [[ -n "${ns}" ]] || {
    echo "it has the address ${ip} and a default route but no nameserver in /etc/resolv.conf"
    return
  }
  if getent hosts "${host}" >/dev/null 2>&1; then
    echo "it has the address ${ip}, a default route and the name server(s) ${ns}, which do not resolve ${host} (this host does: check that the bridge's DNS forwards and that the host NATs the bridge's subnet)"
  else
    echo "it has the address ${ip}, a default route and the name server(s) ${ns}; this host cannot resolve ${host} either"
  fi
}

do_wait_network() {
  local host deadline=$((SECONDS + network_timeout))
  host="$(container_mirror_host)"
  while ((SECONDS < deadline)); do
    if in_ct getent hosts "${host}" >/dev/null 2>&1; then return 0; fi
    sleep 2
  done
  die "container ${name} cannot resolve its mirror's host ${host} after ${network_timeout} s: $(network_diagnosis "${host}")"
}

# Installs PACKAGE... in the container unless each is installed already.
ensure_packages() {
  local missing=() installed p
  # shellcheck disable=SC2016 # dpkg-query's format, not the shell's
  installed="$({ in_ct dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true; } |
    awk '$NF == "installed" {print $1}')"
  for p in "$@"; do
    grep -qxF -- "${p}" <<<"${installed}" || missing+=("${p}")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "  installing ${missing[*]}"
    in_ct env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    in_ct env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    changed=1
  fi
}

do_install_runtime() {
  # What the service needs at run time: the binaries' libraries and curl (health checks).
  local owners pkgs=() libs=() lib
  owners="$("${SCRIPT_DIR}/library-packages.sh" "${binary_names[@]/#/${binaries}/}")"
  mapfile -t pkgs < <(awk '$2 != "-" {print $2}' <<<"${owners}" | sort -u)
  ensure_packages curl ca-certificates "${pkgs[@]}"
  # Libraries no Debian package provides (CUDA's) are copied from this host.
  mapfile -t libs < <(awk '$2 == "-" {print $1}' <<<"${owners}")
  for lib in "${libs[@]}"; do
    install_file "$(readlink -f "${lib}")" "/usr/local/lib/tessera/$(basename "${lib}")" 0755
  done
  if [[ ${#libs[@]} -gt 0 ]]; then
    echo "/usr/local/lib/tessera" | push_file /etc/ld.so.conf.d/tessera.conf 0644
    in_ct ldconfig
  fi
}

do_install_binaries() {
  local b
  for b in "${binary_names[@]}"; do
    install_file "${binaries}/${b}" "/usr/local/bin/${b}" 0755
  done
}

source_stamp() {
  (cd "${REPO_DIR}" && git ls-files -z --cached | xargs -0 sha256sum 2>/dev/null | sha256sum | cut -d' ' -f1)
}

do_build_tessera() {
  local stamp
  stamp="$(source_stamp)"
  if [[ "$(in_ct cat /opt/tessera/source.sha256 2>/dev/null || true)" == "${stamp}" ]]; then
    echo "  up to date (${stamp:0:12})"
    return 0
  fi
  push_file /opt/tessera/install-deps.sh 0755 <"${REPO_DIR}/tools/install-deps.sh"
  # The build's packages, minus those the container had before, are removed afterwards.
  in_ct sh -c "dpkg-query -W -f='\${Package}\n' | sort > /opt/tessera/packages-before.txt"
  in_ct /opt/tessera/install-deps.sh --build-only
  (cd "${REPO_DIR}" && git ls-files -z --cached | tar --null -T - -czf -) |
    in_ct_input sh -c 'rm -rf /opt/tessera/src && mkdir -p /opt/tessera/src && tar -xzf - -C /opt/tessera/src'
  # shellcheck disable=SC2016 # expanded inside the container
  in_ct sh -c 'cd /opt/tessera/src &&
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF -DTESSERA_BENCH=OFF &&
    cmake --build build --target tesserad tessera-worker tessera &&
    for b in tesserad tessera-worker tessera; do
      install -m 0755 "$(find build -type f -name "$b" -perm -u+x | head -1)" /usr/local/bin/ || exit 1
    done'
  # Keep what the binaries load, drop the toolchain, the -dev packages and the source.
  push_file /opt/tessera/library-packages.sh 0755 <"${SCRIPT_DIR}/library-packages.sh"
  # shellcheck disable=SC2016 # expanded inside the container
  in_ct sh -c '/opt/tessera/library-packages.sh "$@" | awk "\$2 != \"-\" {print \$2}" |
    sort -u > /opt/tessera/runtime-packages.txt' sh "${binary_names[@]/#//usr/local/bin/}"
  # The runtime packages become manual, everything else the build brought in automatic,
  # and autoremove takes what no manual package depends on (Recommends and Suggests do not
  # count: apt suggests dpkg-dev, which recommends build-essential).
  # shellcheck disable=SC2016 # expanded inside the container
  in_ct sh -c 'xargs -r apt-mark manual < /opt/tessera/runtime-packages.txt >/dev/null &&
    dpkg-query -W -f="\${Package}\n" | sort | comm -13 /opt/tessera/packages-before.txt - |
      grep -vxF -f /opt/tessera/runtime-packages.txt | xargs -r apt-mark auto >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get autoremove --purge -y -q \
      -o APT::AutoRemove::RecommendsImportant=false \
      -o APT::AutoRemove::SuggestsImportant=false >/dev/null &&
    apt-get clean && rm -rf /opt/tessera/src'
  ensure_packages curl ca-certificates
  echo "${stamp}" | in_ct_input sh -c 'cat > /opt/tessera/source.sha256'
  changed=1
}

do_create_user() {
  if ! in_ct id -u tessera >/dev/null 2>&1; then
    in_ct useradd --system --home-dir /var/lib/tessera --shell /usr/sbin/nologin tessera
    changed=1
  fi
}

do_write_config() {
  config_yaml | push_file /etc/tessera/tesserad.yaml 0644
}

do_install_api_key() {
  push_file /etc/tessera/api-key 0640 <"${api_key_file}"
  in_ct chgrp tessera /etc/tessera/api-key
}

do_install_unit() {
  # The unit mounts /models read-only, where the model directory is bound.
  push_file /etc/systemd/system/tesserad.service 0644 <"${REPO_DIR}/deploy/systemd/tesserad.service"
}

do_check_config() {
  # As the service will run it: its user, and its cache directory (where the embedded
  # default model is generated), which systemd's CacheDirectory= would create.
  in_ct install -d -o tessera -g tessera -m 0750 /var/cache/tessera
  in_ct runuser -u tessera -- env XDG_CACHE_HOME=/var/cache \
    /usr/local/bin/tesserad --config /etc/tessera/tesserad.yaml --check ||
    die "tesserad --check rejected the configuration or the model (see above)"
}

do_start_service() {
  in_ct systemctl daemon-reload
  in_ct systemctl enable tesserad >/dev/null
  if [[ ${changed} -eq 1 ]]; then
    in_ct systemctl restart tesserad
  else
    in_ct systemctl start tesserad
  fi
}

do_wait_ready() {
  local i
  for ((i = 0; i < ready_timeout; i += 2)); do
    if in_ct curl -fsS "http://127.0.0.1:${http_port}/ready" >/dev/null 2>&1; then
      echo "  ready"
      return 0
    fi
    if ! in_ct systemctl is-active --quiet tesserad; then
      in_ct journalctl -u tesserad -n 30 --no-pager >&2 || true
      die "tesserad is not running (journal above)"
    fi
    sleep 2
  done
  die "tesserad not ready after ${ready_timeout} s: lxc-attach -n ${name} -- journalctl -u tesserad"
}

do_print_endpoints() {
  local ip
  ip="$(lxc-info -n "${name}" -iH 2>/dev/null | head -1)"
  ip="${ip:-CONTAINER_IP}"
  echo
  echo "Tessera is serving in container ${name}:"
  echo "  REST (OpenAI-compatible): http://${ip}:${http_port}/v1   health: /health, /ready, /metrics"
  echo "  gRPC: ${ip}:${grpc_port}   (grpcurl -plaintext ${ip}:${grpc_port} list)"
  local auth=""
  if [[ -n "${api_key_file}" ]]; then auth=" -H \"Authorization: Bearer \$(cat ${api_key_file})\""; fi
  echo "  try:  curl http://${ip}:${http_port}/v1/models${auth}"
  echo "  logs: lxc-attach -n ${name} -- journalctl -u tesserad -f"
}

# --- the plan ---
if [[ ${dry_run} -eq 1 ]]; then
  echo "# dry run: nothing is changed; on a real run each action is skipped when already done"
fi
if [[ "${template}" == debian ]]; then
  action create-container "name=${name} dist=debian release=bookworm template=debian mirror=${mirror}"
else
  action create-container "name=${name} dist=debian release=bookworm template=download"
fi
action configure-container "autostart=1 nesting=1"
if [[ -n "${model_dir}" ]]; then
  action bind-model-dir "host=${model_dir} container=/models mode=ro"
fi
if [[ ${#gpu_list[@]} -gt 0 ]]; then
  action gpu-passthrough "gpus=${gpus} devices=/dev/nvidiactl,/dev/nvidia-uvm,$(printf '/dev/nvidia%s,' "${gpu_list[@]}" | sed 's/,$//')"
  action gpu-driver "driver libraries through LXC's nvidia hook"
fi
action start-container "name=${name}"
action wait-network "resolves the mirror host, timeout=${network_timeout}s"
if [[ -n "${binaries}" ]]; then
  action install-runtime "libraries of ${binaries}/{tesserad,tessera-worker,tessera}"
  action install-binaries "from=${binaries} to=/usr/local/bin/{tesserad,tessera-worker,tessera}"
else
  action build-tessera "source=${REPO_DIR} (tracked files) to=/usr/local/bin/{tesserad,tessera-worker,tessera}; build packages removed after"
fi
action create-user "user=tessera"
action write-config "path=/etc/tessera/tesserad.yaml tp=${tp} model=${container_model:-embedded-default}"
if [[ -n "${api_key_file}" ]]; then
  action install-api-key "path=/etc/tessera/api-key mode=0640"
fi
action install-unit "path=/etc/systemd/system/tesserad.service"
action check-config "tesserad --config /etc/tessera/tesserad.yaml --check"
action start-service "unit=tesserad"
action wait-ready "url=http://127.0.0.1:${http_port}/ready timeout=${ready_timeout}s"
action print-endpoints "http=${http_port} grpc=${grpc_port}"
