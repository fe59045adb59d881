#!/usr/bin/env bash
# A RabbitMQ of another series (4.3 by default) on this machine, next to and apart from the
# broker on 5672: Debian's rabbitmq-server of that series in a root of its own (debootstrap),
# its own node name, AMQP port, distribution port and epmd port.
#
#   broker-root.sh start        make the root if missing, start the node (idempotent), enable
#                               every feature flag, print its AMQP_URL and RABBITMQCTL
#   broker-root.sh stop         stop the node (the root and the node's data stay)
#   broker-root.sh status       say whether the node runs, its version and URL
#   broker-root.sh env          print `export AMQP_URL=… RABBITMQCTL=… RABBITMQ_MANAGEMENT_URL=…`
#                               lines for `eval`
#   broker-root.sh ctl ARGS...  rabbitmqctl against the node (what RABBITMQCTL runs)
#   broker-root.sh run CMD...   CMD inside the root with the node's environment (rabbitmq-queues…)
#   broker-root.sh root         make the root only, print its path
#
# Environment:
#   RABBITMQ_SERIES=4.3          4.3 (Debian forky: 4.3.x on Erlang/OTP 29) or 4.0 (trixie)
#   RR_BROKER_HOME=/var/lib/rabbit-retry   roots and node folders live here
#   RR_BROKER_PORT=5674          AMQP port (127.0.0.1 only)
#   RR_BROKER_DIST_PORT=PORT+20000,  RR_BROKER_EPMD_PORT=4374
#   RR_BROKER_MANAGEMENT_PORT=PORT+10000   the management plugin's HTTP API (127.0.0.1 only; 15674
#                                for 5674), which the console and `status` read delayed counts from;
#                                `off`: no management plugin. `start` enables it on a node already
#                                running without it.
#   RR_DEBIAN_MIRROR             default: the first deb.debian.org-style URI of this machine's apt
#                                sources, else http://deb.debian.org/debian
#   BROKER_WAIT_SECS=120         bound on the node's boot
#
# Needs root (debootstrap, chroot, mount) and Linux. On a machine without these (macOS…), run the
# series in a container instead and set AMQP_URL: `docker run -d -p 5674:5672 rabbitmq:4.3`,
# with RABBITMQCTL="docker exec <container> rabbitmqctl".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
series=${RABBITMQ_SERIES:-4.3}
home=${RR_BROKER_HOME:-/var/lib/rabbit-retry}
port=${RR_BROKER_PORT:-5674}
dist_port=${RR_BROKER_DIST_PORT:-$((port + 20000))}
epmd_port=${RR_BROKER_EPMD_PORT:-4374}
mgmt_port=${RR_BROKER_MANAGEMENT_PORT:-$((port + 10000))}
wait_secs=${BROKER_WAIT_SECS:-120}

say() { echo "broker-$series: $*"; }
die() {
  echo "broker-$series: $*" >&2
  exit 1
}

case $series in
  4.3) suite=forky ;;
  4.0) suite=trixie ;;
  *) die "RABBITMQ_SERIES=$series: this script knows 4.3 (Debian forky) and 4.0 (Debian trixie)" ;;
esac
for v in port dist_port epmd_port wait_secs; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, not '${!v}'"
done
[[ $mgmt_port == off || $mgmt_port =~ ^[0-9]+$ ]] || die "RR_BROKER_MANAGEMENT_PORT must be a number or 'off', not '$mgmt_port'"

root=$home/root-$suite
node_dir=$home/node-$series-$port
node=rr${series//./}_$port@localhost
url=amqp://guest:guest@127.0.0.1:$port
mgmt_url=
[[ $mgmt_port == off ]] || mgmt_url=http://guest:guest@127.0.0.1:$mgmt_port

need_root() {
  (($(id -u) == 0)) || die "this needs root (debootstrap, chroot, mount): run it with sudo, or run RabbitMQ $series in a container and set AMQP_URL"
  [[ $(uname -s) == Linux ]] || die "this needs Linux; elsewhere run RabbitMQ $series in a container and set AMQP_URL"
}

mirror() {
  if [[ -n ${RR_DEBIAN_MIRROR:-} ]]; then
    echo "$RR_DEBIAN_MIRROR"
    return
  fi
  local m
  m=$(grep -hoE '(URIs:|^deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
    grep -oE 'https?://[^ ]+' | head -n 1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# Mounts /proc and the node folder (at the same path) inside the root; idempotent.
mounts() {
  mkdir -p "$root/proc" "$root$node_dir" "$node_dir"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root$node_dir" || mount --bind "$node_dir" "$root$node_dir"
}

make_root() {
  need_root
  [[ -x $root/usr/lib/rabbitmq/bin/rabbitmq-server && -e $root/.rabbit-retry-root ]] && return 0
  local began=$SECONDS
  if ! command -v debootstrap >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and there is no apt-get to install it"
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  mkdir -p "$home"
  if [[ ! -x $root/usr/bin/apt-get ]]; then
    rm -rf "$root"
    # Older debootstraps have no script for the newest suites; sid's fits them all.
    local script=/usr/share/debootstrap/scripts/sid
    [[ -e /usr/share/debootstrap/scripts/$suite ]] && script=/usr/share/debootstrap/scripts/$suite
    say "making a Debian $suite root in $root (about a minute)"
    debootstrap --variant=minbase "$suite" "$root" "$(mirror)" "$script" >"$home/debootstrap-$suite.log" 2>&1 ||
      die "debootstrap failed; see $home/debootstrap-$suite.log"
  fi
  # The package's post-install would start a broker on 5672 and an epmd on 4369.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99rabbit-retry"
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost\n' >"$root/etc/hosts"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  say "installing rabbitmq-server in the root"
  chroot "$root" /bin/sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server' \
    >"$home/apt-$suite.log" 2>&1 || die "installing rabbitmq-server in $root failed; see $home/apt-$suite.log"
  # The root's rabbitmq user takes the host's uid and gid where the host has one, so that the
  # nodes' processes and files show as rabbitmq on the host too (not as whoever owns that uid).
  if id rabbitmq >/dev/null 2>&1; then
    local hu hg
    hu=$(id -u rabbitmq)
    hg=$(id -g rabbitmq)
    chroot "$root" groupmod -o -g "$hg" rabbitmq
    chroot "$root" usermod -o -u "$hu" -g "$hg" rabbitmq
    chroot "$root" chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq /etc/rabbitmq 2>/dev/null || true
  fi
  touch "$root/.rabbit-retry-root"
  say "root ready in $((SECONDS - began))s: $(chroot "$root" dpkg-query -W -f '${Version}' rabbitmq-server)"
}

owner() { chroot "$root" id -u rabbitmq; }

# in_root CMD...: CMD in the root as its rabbitmq user, with the node's environment only.
in_root() {
  local uid gid
  uid=$(owner)
  gid=$(chroot "$root" id -g rabbitmq)
  chroot --userspec="$uid:$gid" "$root" env -i \
    PATH=/usr/lib/rabbitmq/bin:/usr/bin:/bin \
    HOME="$node_dir" LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    RABBITMQ_CONF_ENV_FILE="$node_dir/rabbitmq-env.conf" \
    ERL_EPMD_PORT="$epmd_port" ERL_EPMD_ADDRESS=127.0.0.1 \
    RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    "$@"
}

ctl() { in_root rabbitmqctl -n "$node" "$@"; }

# Enables the management plugin on the running node when it lacks it (a node started before
# the plugin was configured), on the port of the config; nothing else of the node changes.
management_on() {
  [[ $mgmt_port != off ]] || return 0
  ctl -q eval 'lists:keymember(rabbitmq_management, 1, application:which_applications()).' 2>/dev/null | grep -qx true && return 0
  say "enabling the management plugin on 127.0.0.1:$mgmt_port"
  ctl -q eval "application:load(rabbitmq_management), application:set_env(rabbitmq_management, tcp_config, [{port, $mgmt_port}, {ip, \"127.0.0.1\"}])." >/dev/null
  in_root env RABBITMQ_ENABLED_PLUGINS_FILE="$node_dir/enabled_plugins" rabbitmq-plugins -n "$node" -q enable rabbitmq_management >/dev/null
}

# The command line that runs rabbitmqctl against this node, for RABBITMQCTL.
ctl_line() { echo "env RABBITMQ_SERIES=$series RR_BROKER_HOME=$home RR_BROKER_PORT=$port RR_BROKER_EPMD_PORT=$epmd_port bash $here/broker-root.sh ctl"; }

node_pids() {
  local f pid args joined
  for f in /proc/[0-9]*/cmdline; do
    args=()
    mapfile -d '' -t args 2>/dev/null <"$f" || continue
    ((${#args[@]} > 0)) && [[ ${args[0]##*/} == beam* ]] || continue
    printf -v joined '\n%s' "${args[@]}"
    [[ $joined == *$'\n-home\n'"$node_dir"* ]] || continue
    pid=${f#/proc/}
    echo "${pid%/cmdline}"
  done
}

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; }

prepare_node() {
  mounts
  local uid
  uid=$(owner)
  mkdir -p "$node_dir/mnesia" "$node_dir/log"
  echo "# Empty on purpose: the node gets its settings from scripts/broker-root.sh." >"$node_dir/rabbitmq-env.conf"
  cat >"$node_dir/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$port
loopback_users = none
# What later 4.x releases refuse by default is refused here too, so that the suite shows
# rabbit-retry uses none of it.
deprecated_features.permit.transient_nonexcl_queues = false
deprecated_features.permit.global_qos = false
EOF
  if [[ $mgmt_port == off ]]; then
    echo "[]." >"$node_dir/enabled_plugins"
  else
    # The management API: where the delayed messages of a brokerDelay queue are counted.
    echo "[rabbitmq_management]." >"$node_dir/enabled_plugins"
    printf 'management.tcp.port = %s\nmanagement.tcp.ip = 127.0.0.1\n' "$mgmt_port" >>"$node_dir/rabbitmq.conf"
  fi
  if [[ ! -s $node_dir/.erlang.cookie ]]; then
    od -An -N24 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F >"$node_dir/.erlang.cookie"
  fi
  chmod 400 "$node_dir/.erlang.cookie"
  chown -R "$uid" "$node_dir"
  chmod 700 "$node_dir"
}

cmd_start() {
  local began=$SECONDS
  make_root
  prepare_node
  if [[ -n $(node_pids) ]] && ctl -q await_startup --timeout 30 >/dev/null 2>&1; then
    say "already running: $url ($(ctl -q version 2>/dev/null || echo '?'))"
    management_on || say "could not enable the management plugin; the tests that need it skip"
  else
    answers && die "port $port is taken by another process; set RR_BROKER_PORT"
    say "starting $node (amqp $port, dist $dist_port, epmd $epmd_port)"
    echo "--- $(date '+%F %T') starting $node" >>"$node_dir/log/startup.log"
    in_root setsid -f env \
      RABBITMQ_NODENAME="$node" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
      RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$dist_port" \
      RABBITMQ_MNESIA_BASE="$node_dir/mnesia" RABBITMQ_LOG_BASE="$node_dir/log" \
      RABBITMQ_PID_FILE="$node_dir/pid" RABBITMQ_CONFIG_FILE="$node_dir/rabbitmq.conf" \
      RABBITMQ_ENABLED_PLUGINS_FILE="$node_dir/enabled_plugins" \
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
      ERL_CRASH_DUMP="$node_dir/log/erl_crash.dump" \
      rabbitmq-server </dev/null >>"$node_dir/log/startup.log" 2>&1
    local deadline=$((SECONDS + wait_secs))
    until ctl -q await_startup --timeout 10 >/dev/null 2>&1; do
      ((SECONDS < deadline)) || die "$node did not start within ${wait_secs}s; see $node_dir/log/"
      sleep 1
    done
    ctl -q enable_feature_flag all >/dev/null
    say "up in $((SECONDS - began))s: RabbitMQ $(ctl -q version)"
  fi
  echo "  AMQP_URL=$url"
  echo "  RABBITMQCTL=\"$(ctl_line)\""
  [[ -z $mgmt_url ]] || echo "  RABBITMQ_MANAGEMENT_URL=$mgmt_url"
  echo "  (or: eval \"\$(RABBITMQ_SERIES=$series bash $here/broker-root.sh env)\")"
}

cmd_stop() {
  if [[ -z $(node_pids) ]]; then
    say "not running"
    return 0
  fi
  ctl -q stop --timeout "$wait_secs" >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 15)) pid
  while [[ -n $(node_pids) ]] && ((SECONDS < deadline)); do sleep 0.5; done
  for pid in $(node_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  # The node's own epmd (on its own port) goes with it.
  pkill -f "epmd.*-port $epmd_port" 2>/dev/null || true
  say "stopped"
}

cmd_status() {
  if [[ -n $(node_pids) ]] && ctl -q ping >/dev/null 2>&1; then
    say "running: $url, RabbitMQ $(ctl -q version)"
  else
    say "not running"
    return 1
  fi
}

cmd=${1:-}
[[ -n $cmd ]] || {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
}
shift
case $cmd in
  start) cmd_start ;;
  stop) need_root && cmd_stop ;;
  status) need_root && cmd_status ;;
  root) make_root && echo "$root" ;;
  env)
    echo "export AMQP_URL=$url"
    echo "export RABBITMQCTL=\"$(ctl_line)\""
    [[ -z $mgmt_url ]] || echo "export RABBITMQ_MANAGEMENT_URL=$mgmt_url"
    ;;
  ctl) need_root && mounts && ctl "$@" ;;
  run) need_root && mounts && in_root "$@" ;;
  *) die "unknown command '$cmd' (start, stop, status, env, ctl, run, root)" ;;
esac
