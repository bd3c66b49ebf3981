#!/usr/bin/env bash
# torch 2.6 (FSDP1, FSDP2, FSDPMemTracker) as an oracle, in an isolated Debian 13 root.
#
# Debian 12's python3-torch is 1.13, where torch.distributed.fsdp does not import. Debian 13
# ships python3-torch 2.6 (CPU, gloo). Its packages must never be installed on the host (they
# would replace its libc and Python), so they live in a root of their own made with debootstrap
# (shared/reference/torch2_on_cpu.md has the facts measured on this machine kind).
#
#   tools/torch2.sh setup            make the root if it is not there (2-3 min, 1.5 GB; reused)
#   tools/torch2.sh status           exit 0 and print the root if it is ready, else say why
#   tools/torch2.sh python ARGS...   run python3 ARGS in the root
#   tools/torch2.sh ranks N ARGS...  the same with WORLD_SIZE=N in the environment: the script
#                                    spawns its N gloo ranks itself (torch.multiprocessing),
#                                    since torchrun cannot run in this build (below)
#
# BUCKETSIM_TORCH2_ROOT sets where the root lives (default /var/cache/bucketsim/torch2.6-root).
# The repository, /tmp and the current directory are bind-mounted at their own paths inside, in
# a private mount namespace (unshare), so paths mean the same inside and out and nothing stays
# mounted when the command ends, whatever ends it. Needs root (debootstrap, chroot, mounts).
#
# Why the environment of every run:
# - USE_LIBUV=0: Debian built torch without libuv; init_process_group otherwise fails with
#   "use_libuv was requested but PyTorch was build without libuv support" (and torchrun fails
#   even with it: its agent store asks for libuv).
# - GLOO_SOCKET_IFNAME=lo, MASTER_ADDR=127.0.0.1: gloo on the loopback only.
# - OMP_NUM_THREADS=1: 2 cores, several ranks.
set -euo pipefail

root=${BUCKETSIM_TORCH2_ROOT:-/var/cache/bucketsim/torch2.6-root}
repo=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)  # the real tree, through a link to tools/
stamp="$root/.bucketsim-torch2-ready"

die() { echo "torch2: $*" >&2; exit 1; }

# The Debian mirror the host's own apt uses (deb822 sources or a sources.list line).
mirror() {
  local url
  url=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
        grep -v security | head -n 1 || true)
  if [[ -z "$url" ]]; then
    url=$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
          awk '{print $2}' | grep -v security | head -n 1 || true)
  fi
  echo "${url:-http://deb.debian.org/debian}"
}

setup() {
  if [[ -f "$stamp" ]]; then
    echo "torch2: root ready at $root"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "making the root needs root (debootstrap, chroot)"
  if ! command -v debootstrap >/dev/null; then
    echo "torch2: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
  fi
  local tmp="$root.partial" url
  url=$(mirror)
  rm -rf "$tmp"
  mkdir -p "$(dirname "$root")"
  echo "torch2: debootstrap trixie with python3-torch from $url into $root (about 2 min)"
  local log="$(dirname "$root")/torch2-debootstrap.log"
  if ! debootstrap --variant=minbase --include=python3-torch trixie "$tmp" "$url" >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    rm -rf "$tmp"
    die "debootstrap failed (full log: $log)"
  fi
  chroot "$tmp" apt-get clean
  rm -rf "$root"
  mv "$tmp" "$root"
  date -u +%FT%TZ >"$stamp"
  echo "torch2: root ready at $root"
}

status() {
  [[ -f "$stamp" ]] || { echo "torch2: no root at $root (tools/torch2.sh setup makes it)"; return 1; }
  [[ $(id -u) -eq 0 ]] || { echo "torch2: running in the root needs root (chroot)"; return 1; }
  command -v unshare >/dev/null || { echo "torch2: unshare is missing (util-linux)"; return 1; }
  echo "torch2: root ready at $root"
}

# python3 ARGS in the root: proc, the repository, /tmp and the working directory mounted, the
# host's name resolvable (gloo warns and resolves it otherwise).
in_root() {
  status >/dev/null || die "$(status)"
  local host
  host=$(hostname)
  grep -qw "$host" "$root/etc/hosts" 2>/dev/null || echo "127.0.0.1 $host" >>"$root/etc/hosts"
  local binds=("$repo" /tmp "$PWD") cmd="mount -t proc proc '$root/proc'" b
  for b in "${binds[@]}"; do
    cmd+=" && mkdir -p '$root$b' && mount --bind '$b' '$root$b'"
  done
  cmd+=" && exec chroot '$root' env -C '$PWD' \"\$@\""
  exec unshare --mount --propagation private sh -c "$cmd" sh \
    env USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1 OMP_NUM_THREADS=1 \
    PYTHONDONTWRITEBYTECODE=1 ${WORLD_SIZE:+WORLD_SIZE=$WORLD_SIZE} python3 "$@"
}

case "${1:-}" in
  setup) setup ;;
  status) status ;;
  python) shift; in_root "$@" ;;
  ranks)
    [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "ranks takes a world size, then the script"
    WORLD_SIZE=$2; shift 2; in_root "$@" ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
