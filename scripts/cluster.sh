#!/usr/bin/env bash
# Runs a three-node RabbitMQ cluster on this machine, next to (and apart from) the
# single broker on 127.0.0.1:5672, for the cluster fault tests.
#
#   cluster.sh start          start rr1, rr2, rr3, join them into one cluster, print the AMQP URLs
#                             (does nothing but say so when the cluster already runs)
#   cluster.sh stop           stop the three nodes and delete CLUSTER_DIR
#   cluster.sh status         one line per node: process, port, cluster membership
#   cluster.sh kill NODE      SIGKILL that node's Erlang VM (the injected fault); prints the pid
#   cluster.sh restart NODE   start a killed node again and wait until it is back in the cluster
#   cluster.sh leader QUEUE   print the node that leads quorum queue QUEUE on vhost /
#   cluster.sh port NODE      print that node's AMQP port
# NODE is 1, 2 or 3, rr1..rr3, or the full node name (rr1@localhost).
#
# Environment:
#   CLUSTER_DIR=/tmp/rabbit-retry-cluster   everything of the cluster: cookie, configs, data, logs
#   CLUSTER_PORT_BASE=5681                  AMQP ports are BASE, BASE+1, BASE+2 (127.0.0.1 only)
#   CLUSTER_DIST_PORT_BASE=PORT_BASE+20000  Erlang distribution ports (25681..25683); CLI tools use
#                                           DIST_PORT_BASE+10..+29 (a second cluster next to this
#                                           one: keep its PORT_BASE 30 or more away)
#   CLUSTER_WAIT_SECS=120                   bound on each wait (node boot, join, stop)
#   CLUSTER_HOST=localhost                  host part of the node names (short names)
#   CLUSTER_DLX_CONFIRM_TIMEOUT_MS=5000     rabbit.dead_letter_worker_publisher_confirm_timeout
#   RABBITMQ_SERIES                         unset: this machine's rabbitmq-server; 4.3 (or 4.0): that
#                                           series from the Debian root of scripts/broker-root.sh
#                                           (made when missing), with its own epmd (port 4374)
#
# The nodes run as the OS user rabbitmq: run this as root (it switches user) or as rabbitmq.
#
# Kept apart from the single broker: its own Erlang cookie (CLUSTER_DIR/.erlang.cookie, found
# through HOME=CLUSTER_DIR for the nodes and for every CLI call), its own rabbitmq-env.conf
# (the system one names the node rabbit@localhost), its own empty plugin list (no management or
# prometheus listener to clash), ports and data folders. The Debian wrappers in /usr/sbin are not
# used: as rabbitmq they cd to /var/lib/rabbitmq and set HOME=. (the single broker's cookie), send
# the server's output into the single broker's /var/log/rabbitmq/startup_log, and as root go
# through su, which resets HOME.
set -euo pipefail

cluster_dir=${CLUSTER_DIR:-/tmp/rabbit-retry-cluster}
port_base=${CLUSTER_PORT_BASE:-5681}
dist_base=${CLUSTER_DIST_PORT_BASE:-$((port_base + 20000))}
wait_secs=${CLUSTER_WAIT_SECS:-120}
host=${CLUSTER_HOST:-localhost}
dlx_timeout=${CLUSTER_DLX_CONFIRM_TIMEOUT_MS:-5000}
names=(rr1 rr2 rr3)
# Marks the folder as made by this script: stop deletes CLUSTER_DIR only when it is there.
stamp=.rabbit-retry-cluster
# An Erlang user flag that the VM ignores; it puts the node's name on the beam.smp command line
# (3.10 names the node after boot, so no -sname is there) and lets kill/stop find the process.
marker=-rabbit_retry_cluster_node

say() { echo "cluster: $*"; }
die() {
  echo "cluster: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^# Kept apart/{/^# Kept apart/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
}

for v in port_base dist_base wait_secs dlx_timeout; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, not '${!v}'"
done
[[ $cluster_dir == /* ]] || die "CLUSTER_DIR must be an absolute path, not '$cluster_dir'"
cluster_dir=${cluster_dir%/}

node_name() { echo "${names[$1]}@$host"; }
amqp_port() { echo $((port_base + $1)); }
dist_port() { echo $((dist_base + $1)); }

# NODE argument -> index 0..2
node_index() {
  case ${1:-} in
    1 | rr1 | "rr1@$host") echo 0 ;;
    2 | rr2 | "rr2@$host") echo 1 ;;
    3 | rr3 | "rr3@$host") echo 2 ;;
    *) die "unknown node '${1:-}': use 1, 2, 3, rr1..rr3 or rr1@$host..rr3@$host" ;;
  esac
}

cmd=${1:-}
[[ -n $cmd ]] || usage
shift

# `port` needs no broker tools and no user switch.
if [[ $cmd == port ]]; then
  (($# == 1)) || usage
  amqp_port "$(node_index "$1")"
  exit 0
fi

# --- tools and user ------------------------------------------------------------------------

# Another series runs chrooted in its root; CLUSTER_DIR is bind-mounted there at the same path,
# so every path below means the same inside and out.
series=${RABBITMQ_SERIES:-}
root=
if [[ -n $series ]]; then
  (($(id -u) == 0)) || die "RABBITMQ_SERIES=$series runs the nodes in a chroot: run this as root"
  root=$(RABBITMQ_SERIES=$series bash "$(dirname "$0")/broker-root.sh" root | tail -n 1)
  [[ -x $root/usr/lib/rabbitmq/bin/rabbitmq-server ]] || die "no rabbitmq-server in $root"
  RABBITMQ_SBIN=/usr/lib/rabbitmq/bin
fi

# The real scripts, not the Debian wrappers (see the top).
sbin=${RABBITMQ_SBIN:-}
if [[ -z $sbin ]]; then
  if [[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]]; then
    sbin=/usr/lib/rabbitmq/bin
  elif command -v rabbitmq-server >/dev/null 2>&1; then
    sbin=$(dirname "$(command -v rabbitmq-server)")
  elif [[ -x /usr/sbin/rabbitmq-server ]]; then
    sbin=/usr/sbin
  else
    die "rabbitmq-server is not installed (Debian/Ubuntu: apt-get install rabbitmq-server)"
  fi
fi
[[ -n $root ]] || command -v erl >/dev/null 2>&1 || die "erl (Erlang) is not on the PATH"
command -v setsid >/dev/null 2>&1 || die "setsid (util-linux) is not on the PATH"
# kill and stop find the nodes' VMs through /proc (Linux).
[[ -d /proc/self ]] || die "this needs /proc (Linux) to find the nodes' processes"
if [[ -n $root ]]; then
  node_path="$sbin:/usr/lib/erlang/bin:/usr/bin:/bin"
else
  node_path="$sbin:$(dirname "$(command -v erl)"):/usr/local/bin:/usr/bin:/bin"
fi

if [[ -n $root ]]; then
  # The root's own rabbitmq user, by number (the host may have none, or another uid).
  owner=$(chroot "$root" id -u rabbitmq):$(chroot "$root" id -g rabbitmq)
  as_rabbitmq=(chroot --userspec="$owner" "$root")
elif (($(id -u) == 0)); then
  id rabbitmq >/dev/null 2>&1 || die "there is no OS user rabbitmq to run the nodes as"
  if command -v runuser >/dev/null 2>&1; then
    as_rabbitmq=(runuser -u rabbitmq --)
  else
    # shellcheck disable=SC2016 # $0 and $@ are for the inner sh
    as_rabbitmq=(su rabbitmq -s /bin/sh -c 'exec "$0" "$@"')
  fi
  owner=rabbitmq
elif [[ $(id -un) == rabbitmq ]]; then
  as_rabbitmq=()
  owner=
else
  die "the nodes run as the OS user rabbitmq: run this as root (sudo bash $0 $cmd ...) or as rabbitmq (sudo -u rabbitmq bash $0 $cmd ...)"
fi

# The environment every node process and CLI call gets, in place of the caller's (env -i), so
# nothing like RABBITMQ_NODENAME or ERL_FLAGS leaks in from the shell that runs this script.
common_env=(
  "PATH=$node_path"
  "HOME=$cluster_dir"
  "LANG=C.UTF-8"
  "LC_ALL=C.UTF-8"
  "RABBITMQ_CONF_ENV_FILE=$cluster_dir/rabbitmq-env.conf"
  "RABBITMQ_USE_LONGNAME=false"
  # epmd is shared with the single broker; if none runs yet, the one a node starts stays local.
  "ERL_EPMD_ADDRESS=127.0.0.1"
  "RABBITMQ_CTL_DIST_PORT_MIN=$((dist_base + 10))"
  "RABBITMQ_CTL_DIST_PORT_MAX=$((dist_base + 29))"
  "RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}"
)
# A series of its own speaks to an epmd of its own, apart from this machine's.
[[ -z $root ]] || common_env+=("ERL_EPMD_PORT=${RR_BROKER_EPMD_PORT:-4374}")

# Makes CLUSTER_DIR visible in the root at the same path (no-op without a root).
mount_in_root() {
  [[ -n $root ]] || return 0
  mkdir -p "$root/proc" "$root$cluster_dir"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root$cluster_dir" || mount --bind "$cluster_dir" "$root$cluster_dir"
}

unmount_in_root() {
  [[ -n $root ]] || return 0
  if mountpoint -q "$root$cluster_dir"; then umount "$root$cluster_dir" || umount -l "$root$cluster_dir"; fi
  rmdir "$root$cluster_dir" 2>/dev/null || true
}

as_node_user() {
  (
    cd "$cluster_dir" 2>/dev/null || cd /
    exec "${as_rabbitmq[@]}" env -i "${common_env[@]}" "$@"
  )
}

# ctl NODE_INDEX TOOL ARGS... : a CLI tool (rabbitmqctl, rabbitmq-queues...) against that node.
ctl() {
  local i=$1 tool=$2
  shift 2
  as_node_user "$sbin/$tool" -n "$(node_name "$i")" "$@"
}

# Pids of the beam.smp processes of node $1 of THIS cluster: the marker with the node's short
# name, and -home CLUSTER_DIR. The single broker has neither.
node_pids() {
  local name=${names[$1]} f pid args joined
  for f in /proc/[0-9]*/cmdline; do
    args=()
    mapfile -d '' -t args 2>/dev/null <"$f" || continue
    ((${#args[@]} > 0)) && [[ ${args[0]##*/} == beam* ]] || continue
    printf -v joined '\n%s' "${args[@]}"
    joined+=$'\n'
    [[ $joined == *$'\n'"$marker"$'\n'"$name"$'\n'* ]] || continue
    [[ $joined == *$'\n-home\n'"$cluster_dir"$'\n'* ]] || continue
    pid=${f#/proc/}
    echo "${pid%/cmdline}"
  done
}

node_alive() { [[ -n $(node_pids "$1") ]]; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

node_log() { echo "$cluster_dir/${names[$1]}/log/$(node_name "$1").log"; }

# Running members of the cluster as node $1 sees them, one per line (empty when it does not answer).
running_nodes() {
  local json
  json=$(ctl "$1" rabbitmqctl -q cluster_status --formatter json 2>/dev/null) || return 0
  json=$(grep -o '"running_nodes":\[[^]]*\]' <<<"$json") || return 0
  grep -o '"[^"]*"' <<<"${json#*:}" | tr -d '"' || true
}

# All members (disc and ram), running or not, as node $1 sees them.
member_nodes() {
  local json part
  json=$(ctl "$1" rabbitmqctl -q cluster_status --formatter json 2>/dev/null) || return 0
  for part in disk_nodes ram_nodes; do
    grep -o "\"$part\":\[[^]]*\]" <<<"$json" | sed 's/^[^:]*://' | grep -o '"[^"]*"' | tr -d '"' || true
  done
}

# First node index whose VM runs and whose app answers; empty if none.
live_node() {
  local i
  for i in 0 1 2; do
    if node_alive "$i" && ctl "$i" rabbitmqctl -q ping >/dev/null 2>&1; then
      echo "$i"
      return 0
    fi
  done
}

# --- files ---------------------------------------------------------------------------------

# put FILE: stdin into FILE, owned by the node user.
put() {
  cat >"$1"
  [[ -z $owner ]] || chown "$(owner_spec)" "$1"
}

# chown's form of the owner: uid:gid in a root, user:user otherwise.
owner_spec() { [[ $owner == *:* ]] && echo "$owner" || echo "$owner:$owner"; }

prepare_dir() {
  [[ -L $cluster_dir ]] && die "$cluster_dir is a symlink; set CLUSTER_DIR to a real folder"
  if [[ -e $cluster_dir && ! -e $cluster_dir/$stamp ]]; then
    die "$cluster_dir exists and was not made by this script; remove it or set CLUSTER_DIR"
  fi
  if [[ ! -d $cluster_dir ]]; then
    mkdir -p "$(dirname "$cluster_dir")"
    mkdir -m 700 "$cluster_dir"
    [[ -z $owner ]] || chown "$(owner_spec)" "$cluster_dir"
  fi
  chmod 700 "$cluster_dir"
  mount_in_root
  echo "made by scripts/cluster.sh of rabbit-retry; 'cluster.sh stop' deletes this folder" | put "$cluster_dir/$stamp"

  # The cluster's own cookie, made once; Erlang refuses a cookie file others can read.
  local cookie=$cluster_dir/.erlang.cookie
  if [[ ! -s $cookie ]]; then
    rm -f "$cookie"
    (
      umask 077
      od -An -N24 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F | put "$cookie"
    )
    chmod 400 "$cookie"
  fi

  # Replaces /etc/rabbitmq/rabbitmq-env.conf, whose NODENAME is the single broker's.
  echo "# Empty on purpose: the nodes get their settings from scripts/cluster.sh." | put "$cluster_dir/rabbitmq-env.conf"
  # No plugins: with management or prometheus on, the three nodes would fight for 15672/15692.
  echo "[]." | put "$cluster_dir/enabled_plugins"
  # RabbitMQ 3.10 takes this key only from advanced.config (rabbitmq.conf has no schema for it).
  # At-least-once dead-lettering resends what the target queue has not confirmed after this
  # long; the default, 180000, is 3 minutes of waiting when a retry queue's leader dies.
  put "$cluster_dir/advanced.config" <<EOF
[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, $dlx_timeout}]}].
EOF

  local i ndir
  for i in 0 1 2; do
    ndir=$cluster_dir/${names[i]}
    if [[ ! -d $ndir ]]; then
      mkdir -p "$ndir/mnesia" "$ndir/log"
      [[ -z $owner ]] || chown -R "$(owner_spec)" "$ndir"
    fi
    # Loopback only, so loopback_users = none (guest from anywhere) reaches nothing outside.
    put "$ndir/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$(amqp_port "$i")
loopback_users = none
EOF
    # A 4.x series refuses what later releases refuse by default (3.10 knows neither key).
    if [[ -n $root ]]; then
      printf '%s\n' "deprecated_features.permit.transient_nonexcl_queues = false" \
        "deprecated_features.permit.global_qos = false" >>"$ndir/rabbitmq.conf"
    fi
  done
}

# --- node lifecycle ------------------------------------------------------------------------

check_ports() {
  local i=$1 p
  for p in "$(amqp_port "$i")" "$(dist_port "$i")"; do
    if port_taken "$p"; then
      die "port $p (for $(node_name "$i")) is taken by another process; set CLUSTER_PORT_BASE / CLUSTER_DIST_PORT_BASE"
    fi
  done
}

# Starts node $1 in the background, in a session of its own. Not `rabbitmq-server -detached`:
# a detached VM sends its output to /dev/null, and what a node prints when it dies before its
# log is open (a host name that does not resolve, a bad config file) would be lost; here it
# lands in log/startup.log. The VM runs under the rabbitmq-server sh script, which exits with it.
launch_node() {
  local i=$1 ndir=$cluster_dir/${names[$1]}
  local out=$ndir/log/startup.log
  [[ -e $out ]] || put "$out" </dev/null
  echo "--- $(date '+%F %T') starting $(node_name "$i")" >>"$out"
  as_node_user setsid -f env \
    "RABBITMQ_NODENAME=$(node_name "$i")" \
    "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1" \
    "RABBITMQ_NODE_PORT=$(amqp_port "$i")" \
    "RABBITMQ_DIST_PORT=$(dist_port "$i")" \
    "RABBITMQ_MNESIA_BASE=$ndir/mnesia" \
    "RABBITMQ_LOG_BASE=$ndir/log" \
    "RABBITMQ_PID_FILE=$ndir/pid" \
    "RABBITMQ_CONFIG_FILE=$ndir/rabbitmq.conf" \
    "RABBITMQ_ADVANCED_CONFIG_FILE=$cluster_dir/advanced.config" \
    "RABBITMQ_ENABLED_PLUGINS_FILE=$cluster_dir/enabled_plugins" \
    "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=$marker ${names[$i]} -kernel inet_dist_use_interface {127,0,0,1}" \
    "ERL_CRASH_DUMP=$ndir/log/erl_crash.dump" \
    "$sbin/rabbitmq-server" </dev/null >>"$out" 2>&1 ||
    die "could not launch rabbitmq-server for $(node_name "$i"); see $out"
}

# Where to look when node $1 does not come up: its log, or what it printed before it had one.
node_failure() {
  local i=$1 out=$cluster_dir/${names[$1]}/log/startup.log
  echo "see $(node_log "$i") and $out; it ends with:"
  tail -n 3 "$out" 2>/dev/null | cut -c1-400 | sed 's/^/    /'
}

# Waits until the rabbit app runs on node $1; fails early when its VM is gone.
await_node() {
  local i=$1 deadline=$((SECONDS + wait_secs)) missing=0
  while :; do
    if node_alive "$i"; then
      missing=0
      ctl "$i" rabbitmqctl -q await_startup --timeout 10 >/dev/null 2>&1 && return 0
    else
      # A few seconds of grace: the VM appears a moment after setsid returns.
      ((++missing < 10)) || die "$(node_name "$i") exited while starting; $(node_failure "$i")"
    fi
    ((SECONDS < deadline)) || die "$(node_name "$i") did not start within ${wait_secs}s; $(node_failure "$i")"
    sleep 1
  done
}

# Waits until node $1 sees exactly the nodes whose VMs run as running members.
await_membership() {
  local i=$1 deadline=$((SECONDS + wait_secs)) want seen j
  while :; do
    want=
    for j in 0 1 2; do
      node_alive "$j" && want+="$(node_name "$j") "
    done
    seen=$(running_nodes "$i" | sort | tr '\n' ' ')
    [[ $seen == "$want" ]] && return 0
    ((SECONDS < deadline)) || die "$(node_name "$i") sees running nodes '${seen% }', expected '${want% }', after ${wait_secs}s; see $(node_log "$i")"
    sleep 1
  done
}

join_node() {
  local i=$1 seed step out
  seed=$(node_name 0)
  if member_nodes 0 | grep -qx "$(node_name "$i")"; then
    return 0
  fi
  say "joining $(node_name "$i") to $seed"
  # The CLI prints the node's boot warnings while it joins; they go to join.log.
  out=$cluster_dir/${names[$i]}/log/join.log
  [[ -e $out ]] || put "$out" </dev/null
  for step in stop_app reset "join_cluster $seed" start_app; do
    # shellcheck disable=SC2086 # "join_cluster $seed" is two words on purpose
    ctl "$i" rabbitmqctl -q $step >>"$out" 2>&1 ||
      die "'rabbitmqctl -n $(node_name "$i") $step' failed; see $out and $(node_log "$i")"
  done
}

print_urls() {
  local i
  for i in 0 1 2; do
    echo "  $(node_name "$i")  amqp://guest:guest@127.0.0.1:$(amqp_port "$i")"
  done
}

cluster_up() {
  local i
  for i in 0 1 2; do
    node_alive "$i" || return 1
  done
  [[ $(running_nodes 0 | sort | tr '\n' ' ') == "$(node_name 0) $(node_name 1) $(node_name 2) " ]]
}

# --- commands ------------------------------------------------------------------------------

# A node whose host does not resolve takes a minute of DNS timeouts to die; say it at once.
check_host() {
  if command -v getent >/dev/null 2>&1 && ! getent hosts "$host" >/dev/null; then
    die "host '$host' does not resolve (getent hosts $host); set CLUSTER_HOST to one that does, e.g. localhost"
  fi
}

cmd_start() {
  local began=$SECONDS i
  if [[ -e $cluster_dir/$stamp ]] && cluster_up; then
    say "already running in $cluster_dir"
    print_urls
    say "ready"
    return 0
  fi
  check_host
  local -a down=()
  for i in 0 1 2; do
    node_alive "$i" || down+=("$i")
  done
  for i in "${down[@]}"; do
    check_ports "$i"
  done
  prepare_dir
  # All VMs boot at once; the joins below need them up.
  for i in "${down[@]}"; do
    say "starting $(node_name "$i") (amqp $(amqp_port "$i"), dist $(dist_port "$i"))"
    launch_node "$i"
  done
  for i in 0 1 2; do
    await_node "$i"
  done
  join_node 1
  join_node 2
  await_membership 0
  # A series of its own starts with every feature flag on, as a new 4.x cluster would.
  if [[ -n $root ]]; then
    ctl 0 rabbitmqctl -q enable_feature_flag all >/dev/null || die "enable_feature_flag all failed on $(node_name 0)"
  fi
  say "3 nodes in $cluster_dir:"
  print_urls
  say "ready in $((SECONDS - began))s (logs: $cluster_dir/rr*/log/)"
}

# SIGKILLs node $1's VM and waits until it is gone; sets killed to its pid(s), or returns 1
# when it does not run.
killed=
kill_node_vm() {
  local i=$1 pid deadline=$((SECONDS + 10))
  killed=$(node_pids "$i" | tr '\n' ' ')
  killed=${killed% }
  [[ -n $killed ]] || return 1
  for pid in $killed; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  while node_alive "$i" && ((SECONDS < deadline)); do
    sleep 0.2
  done
  ! node_alive "$i" || die "$(node_name "$i") (pid $killed) still runs after SIGKILL"
}

cmd_stop() {
  local i
  if [[ ! -e $cluster_dir ]]; then
    for i in 0 1 2; do
      node_alive "$i" && die "$(node_name "$i") runs but $cluster_dir is gone; kill it with: $0 kill $((i + 1))"
    done
    say "not running (no $cluster_dir)"
    return 0
  fi
  [[ -e $cluster_dir/$stamp ]] || die "$cluster_dir was not made by this script; not touching it"
  local -a jobs=()
  for i in 0 1 2; do
    if node_alive "$i"; then
      say "stopping $(node_name "$i")"
      ctl "$i" rabbitmqctl -q stop --timeout "$wait_secs" >/dev/null 2>&1 &
      jobs+=("$!")
    fi
  done
  for i in "${jobs[@]}"; do
    wait "$i" || true
  done
  # What did not stop cleanly goes the hard way; only VMs of this cluster match node_pids.
  local deadline=$((SECONDS + 10))
  for i in 0 1 2; do
    while node_alive "$i" && ((SECONDS < deadline)); do
      sleep 0.5
    done
    if kill_node_vm "$i"; then
      say "killed leftover $(node_name "$i") (pid $killed)"
    fi
  done
  unmount_in_root
  rm -rf "$cluster_dir"
  say "stopped; deleted $cluster_dir"
}

cmd_status() {
  local i n pids live members running state
  if [[ ! -e $cluster_dir ]]; then
    say "not running (no $cluster_dir)"
    for i in 0 1 2; do
      node_alive "$i" && echo "$(node_name "$i")  WARNING: a VM runs (pid $(node_pids "$i" | tr '\n' ' '))"
    done
    return 0
  fi
  live=$(live_node)
  if [[ -n $live ]]; then
    members=$(member_nodes "$live")
    running=$(running_nodes "$live")
  else
    members='' running=''
  fi
  for i in 0 1 2; do
    pids=$(node_pids "$i" | tr '\n' ' ')
    pids=${pids% }
    if [[ -z $pids ]]; then
      state="down"
    elif grep -qx "$(node_name "$i")" <<<"$running"; then
      state="running (pid $pids), in the cluster"
    elif grep -qx "$(node_name "$i")" <<<"$members"; then
      state="VM up (pid $pids), member but not running (booting or app stopped)"
    else
      state="VM up (pid $pids), not in the cluster"
    fi
    printf '%s  amqp 127.0.0.1:%s  %s\n' "$(node_name "$i")" "$(amqp_port "$i")" "$state"
  done
  if [[ -n $live ]]; then
    n=$(grep -c . <<<"$running" || true)
    say "$n of 3 nodes running (as seen by $(node_name "$live"))"
  else
    say "no node answers"
  fi
}

cmd_kill() {
  local i
  i=$(node_index "$1")
  kill_node_vm "$i" || die "$(node_name "$i") is not running"
  say "killed $(node_name "$i") (pid $killed)"
}

cmd_restart() {
  local i began=$SECONDS
  i=$(node_index "$1")
  [[ -e $cluster_dir/$stamp ]] || die "no cluster in $cluster_dir; run: $0 start"
  if node_alive "$i"; then
    say "$(node_name "$i") already runs"
  else
    check_ports "$i"
    prepare_dir
    say "starting $(node_name "$i")"
    launch_node "$i"
  fi
  await_node "$i"
  await_membership "$i"
  say "$(node_name "$i") back in the cluster in $((SECONDS - began))s"
}

cmd_leader() {
  local queue=$1 live out
  live=$(live_node)
  [[ -n $live ]] || die "no node of the cluster answers"
  # Tab-separated: name, type, leader.
  out=$(ctl "$live" rabbitmqctl -q list_queues -p / name type leader --no-table-headers) ||
    die "list_queues on $(node_name "$live") failed"
  out=$(awk -F '\t' -v q="$queue" '$1 == q { print $2 "\t" $3; exit }' <<<"$out")
  [[ -n $out ]] || die "no queue '$queue' on vhost /"
  [[ ${out%%$'\t'*} == quorum ]] || die "queue '$queue' is ${out%%$'\t'*}, not quorum"
  out=${out#*$'\t'}
  [[ -n $out ]] || die "queue '$queue' has no leader right now"
  echo "$out"
}

case $cmd:$# in
  start:0) cmd_start ;;
  stop:0) cmd_stop ;;
  status:0) cmd_status ;;
  kill:1) cmd_kill "$1" ;;
  restart:1) cmd_restart "$1" ;;
  leader:1) cmd_leader "$1" ;;
  *) usage ;;
esac
