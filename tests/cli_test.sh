#!/usr/bin/env bash
# The binaries explain themselves: --help lists their flags, and bad command
# lines fail fast with a message that names the problem.
#
# usage: cli_test.sh PS_SERVER PS_WORKER PS_CTL LAUNCHER
set -uo pipefail
SERVER="$1" WORKER="$2" CTL="$3" LAUNCHER="$4"
failures=0
source "$(dirname "$0")/wait_lib.sh"
source "$(dirname "$0")/expect_lib.sh"


for flag in listen port_file shard_id num_shards num_workers mode lr pull_timeout \
            checkpoint_dir checkpoint_every checkpoint_secs checkpoint_keep worker_timeout \
            min_workers sync_quorum tls_cert tls_key tls_ca auth_token_file tls_reload_secs \
            insecure health_listen reflection optimizer momentum beta1 beta2 eps weight_decay \
            lr_schedule warmup_steps decay_steps decay_rate min_lr staleness_lr; do
  expect "ps_server --help lists --$flag" 1 "--$flag \(" "$SERVER" --help
done
for flag in servers worker_id num_workers standalone model hidden dataset_dir batch_size \
            epochs max_steps seed shuffle eval_every metrics_file progress save_model transport device gpu tf32 keepalive wait_timeout \
            retry_timeout slowdown tls_ca tls_cert tls_key tls_server_name auth_token_file insecure \
            lr optimizer momentum beta1 beta2 eps weight_decay lr_schedule warmup_steps; do
  expect "ps_worker --help lists --$flag" 1 "--$flag \(" "$WORKER" --help
done
expect "ps_ctl --help names its commands" 1 "ps_ctl status" "$CTL" --help
expect "launcher --help" 0 "--mode=sync\|async" "$LAUNCHER" --help

expect "server rejects an unknown mode" 2 "unknown mode 'fast'.*sync.*async" \
  "$SERVER" --listen=127.0.0.1:0 --mode=fast
expect "server rejects an unknown optimizer" 2 "unknown --optimizer 'lion' \(known: sgd, momentum, nesterov, adagrad, adam, adamw\)" \
  "$SERVER" --listen=127.0.0.1:0 --optimizer=lion
expect "server rejects --beta1=1" 2 "--beta1 must be in \[0, 1\), got 1" \
  "$SERVER" --listen=127.0.0.1:0 --optimizer=adam --beta1=1
expect "server rejects --beta2=-0.5" 2 "--beta2 must be in \[0, 1\)" \
  "$SERVER" --listen=127.0.0.1:0 --optimizer=adam --beta2=-0.5
expect "server rejects --eps=0" 2 "--eps must be > 0, got 0" \
  "$SERVER" --listen=127.0.0.1:0 --optimizer=adam --eps=0
expect "server rejects --lr=0" 2 "--lr must be a positive number" "$SERVER" --listen=127.0.0.1:0 --lr=0
expect "server rejects a negative --momentum" 2 "--momentum must be >= 0" \
  "$SERVER" --listen=127.0.0.1:0 --optimizer=momentum --momentum=-0.5
expect "server rejects a negative --weight_decay" 2 "--weight_decay must be >= 0" \
  "$SERVER" --listen=127.0.0.1:0 --weight_decay=-0.01
expect "server rejects an unknown --lr_schedule" 2 "unknown --lr_schedule 'linear'" \
  "$SERVER" --listen=127.0.0.1:0 --lr_schedule=linear
expect "server rejects an unknown --staleness_lr" 2 "unknown --staleness_lr 'sqrt'" \
  "$SERVER" --listen=127.0.0.1:0 --mode=async --staleness_lr=sqrt
expect "worker rejects an unknown optimizer" 2 "unknown --optimizer 'lion'" \
  "$WORKER" --standalone --optimizer=lion --max_steps=1
expect "server rejects a shard id out of range" 2 "shard_id must be in \[0, 2\), got 5" \
  "$SERVER" --listen=127.0.0.1:0 --shard_id=5 --num_shards=2
expect "server rejects a bad listen address" 2 "not HOST:PORT" "$SERVER" --listen=nonsense
expect "server rejects --checkpoint_keep=0" 2 "--checkpoint_keep >= 1" \
  "$SERVER" --listen=127.0.0.1:0 --checkpoint_dir=/tmp --checkpoint_keep=0
expect "server names a checkpoint dir it cannot create" 2 "cannot create checkpoint dir /proc/nonexistent/ckpt" \
  "$SERVER" --listen=127.0.0.1:0 --checkpoint_dir=/proc/nonexistent/ckpt
expect "server rejects a quorum above the workers" 2 "sync_quorum must be in \[1, num_workers=3\].*got 4" \
  "$SERVER" --listen=127.0.0.1:0 --num_workers=3 --sync_quorum=4
expect "server rejects a quorum in async mode" 2 "--sync_quorum and --min_workers apply to --mode=sync only" \
  "$SERVER" --listen=127.0.0.1:0 --mode=async --sync_quorum=1
expect "server wants --tls_key with --tls_cert" 2 "--tls_cert and --tls_key go together" \
  "$SERVER" --listen=127.0.0.1:0 --tls_cert=/etc/hostname
expect "server names a certificate it cannot read" 2 "--tls_key: cannot read /nonexistent/k.pem" \
  "$SERVER" --listen=127.0.0.1:0 --tls_cert=/etc/hostname --tls_key=/nonexistent/k.pem
expect "server rejects --tls_reload_secs=0" 2 "--tls_reload_secs must be >= 1" \
  "$SERVER" --listen=127.0.0.1:0 --tls_reload_secs=0
expect "worker with a certificate wants the CA" 1 "a TLS client needs --tls_ca" \
  "$WORKER" --servers=127.0.0.1:1 --tls_cert=/etc/hostname --tls_key=/etc/hostname --max_steps=1
expect "server rejects a negative --worker_timeout" 2 "--worker_timeout must be >= 0" \
  "$SERVER" --listen=127.0.0.1:0 --worker_timeout=-1
expect "server rejects --pull_timeout=0 naming it" 2 "--pull_timeout must be > 0" \
  "$SERVER" --listen=127.0.0.1:0 --pull_timeout=0
expect "server rejects --max_waiting_calls=0 naming it" 2 "--max_waiting_calls must be >= 1" \
  "$SERVER" --listen=127.0.0.1:0 --max_waiting_calls=0
expect "server rejects a NaN timeout (an endless wait)" 2 "--pull_timeout=nan is not a number" \
  "$SERVER" --listen=127.0.0.1:0 --pull_timeout=nan
expect "worker rejects a NaN timeout (an endless wait)" 2 "--wait_timeout=nan is not a number" \
  "$WORKER" --servers=127.0.0.1:1 --wait_timeout=nan --max_steps=1
expect "worker rejects a negative --retry_timeout" 2 "--retry_timeout must be >= 0" \
  "$WORKER" --servers=127.0.0.1:1 --retry_timeout=-1 --max_steps=1
expect "worker without servers says how to fix it" 2 "--servers is empty.*--standalone" \
  "$WORKER" --max_steps=1
expect "server rejects a coordinator that is not etcd" 2 "--coordinator: .*etcd://HOST:PORT" \
  "$SERVER" --listen=127.0.0.1:0 --coordinator=zk://127.0.0.1:2181
expect "worker rejects a coordinator ttl under 2 s" 2 "--coordinator_ttl=1: must be between 2" \
  "$WORKER" --coordinator=etcd://127.0.0.1:2379 --coordinator_ttl=1 --max_steps=1
expect "ps_ctl members needs a coordinator" 2 "members needs --coordinator" "$CTL" members
expect "server names an etcd that does not answer" 2 "etcd 127.0.0.1:1: .*failed to connect" \
  "$SERVER" --listen=127.0.0.1:0 --coordinator=etcd://127.0.0.1:1
expect "worker names the dataset package" 1 "dataset-fashion-mnist" \
  "$WORKER" --standalone --dataset_dir=/nonexistent
expect "worker rejects a bad --hidden" 2 "--hidden=5,x: 'x' is not a positive integer" \
  "$WORKER" --standalone --hidden=5,x
expect "worker without CUDA support or a GPU rejects --device=cuda" 1 "no CUDA (support|device)" \
  "$WORKER" --standalone --device=cuda --max_steps=1
expect "worker rejects a negative --keepalive" 2 "--keepalive must be 0 .off. or 1..86400 seconds, got -1" \
  "$WORKER" --servers=127.0.0.1:1 --keepalive=-1 --max_steps=1
expect "worker rejects a --keepalive under 1 s" 2 "--keepalive must be 0 .off. or 1..86400 seconds, got 0.5" \
  "$WORKER" --servers=127.0.0.1:1 --keepalive=0.5 --max_steps=1
expect "worker rejects a negative --gpu" 2 "gpu must be >= 0, got -1" \
  "$WORKER" --standalone --gpu=-1 --max_steps=1
expect "worker rejects an unknown --slowdown_of" 2 "unknown --slowdown_of 'sleep' \(known: compute, step\)" \
  "$WORKER" --standalone --slowdown=1 --slowdown_of=sleep --max_steps=1
expect "worker rejects --slowdown_every below 1" 2 "--slowdown_every must be >= 1, got 0" \
  "$WORKER" --standalone --slowdown=1 --slowdown_every=0 --max_steps=1
expect "worker logs why --device=auto chose the CPU" 0 "on cpu .*auto: (built without CUDA|no CUDA device)" \
  "$WORKER" --standalone --max_steps=1
expect "worker rejects an unknown --progress" 2 "unknown --progress 'yes' \(known: auto, on, off\)" \
  "$WORKER" --standalone --progress=yes --max_steps=1
# Not a terminal (a pipe): the plain lines only, no carriage return. Forced
# on: the progress line, redrawn with '\r' and ended by a newline.
out=$(timeout 30 "$WORKER" --standalone --max_steps=3 --threads=1 2>&1)
if [[ "$out" != *$'\r'* && "$out" == *"worker 0 done"* ]]; then
  echo "ok   worker in a pipe writes plain lines (--progress=auto)"
else
  echo "FAIL worker in a pipe writes plain lines (--progress=auto):"; echo "$out" | cat -A | head -5
  failures=$((failures + 1))
fi
out=$(timeout 30 "$WORKER" --standalone --max_steps=3 --threads=1 --progress=on 2>&1)
if [[ "$out" == *$'\r''step 3/3 (100%)  '*' samples/s  loss '*'  ETA 0s'$'\n'* ]]; then
  echo "ok   worker --progress=on draws the progress line"
else
  echo "FAIL worker --progress=on draws the progress line:"; echo "$out" | cat -A | head -5
  failures=$((failures + 1))
fi
expect "worker gives up on unreachable servers" 1 "cannot register.*127.0.0.1:1" \
  "$WORKER" --servers=127.0.0.1:1 --connect_timeout=1 --max_steps=1
expect "worker rejects an unknown transport" 2 "unknown transport .carrier-pigeon." \
  "$WORKER" --servers=127.0.0.1:1 --transport=carrier-pigeon
expect "worker rejects a batch larger than its share of the data" 2 "--batch_size=100000 with 1 workers leaves no full batch" \
  "$WORKER" --standalone --batch_size=100000 --max_steps=1
expect "worker rejects an unknown --wire_dtype" 2 "--wire_dtype: unknown wire dtype .fp8.: expected .f32. or .bf16." \
  "$WORKER" --servers=127.0.0.1:1 --wire_dtype=fp8
expect "ps_ctl reports an unreachable server" 1 "127.0.0.1:1" \
  "$CTL" status --servers=127.0.0.1:1 --timeout=1
expect "ps_ctl rejects an unknown command" 2 "usage: ps_ctl" "$CTL" frobnicate --servers=x:1
expect "ps_ctl rejects a NaN --timeout (an endless wait)" 2 "--timeout=nan is not a number" \
  "$CTL" status --servers=127.0.0.1:1 --timeout=nan
expect "launcher rejects an unknown option" 2 "unknown option '--bogus'" "$LAUNCHER" --bogus

# The server's --pull_timeout caps the wait a worker asks for: worker 0 of 2
# asks for 60 s, but its step fails after the server's 1 s, naming worker 1.
"$SERVER" --listen=127.0.0.1:0 --port_file="$TEST_TMPDIR/cap.port" --num_workers=2 \
  --pull_timeout=1 >/dev/null 2>&1 &
cap_server=$!
wait_for_file 10 "$TEST_TMPDIR/cap.port"
expect "server --pull_timeout caps a worker's longer --wait_timeout" 1 \
  "DEADLINE_EXCEEDED.*missing gradients from workers \[1\]" \
  "$WORKER" --servers="$(cat "$TEST_TMPDIR/cap.port")" --worker_id=0 --num_workers=2 \
  --wait_timeout=60 --max_steps=2
kill "$cap_server" 2>/dev/null
wait "$cap_server" 2>/dev/null

expect "launcher rejects a bad --gpus_per_host" 2 "--gpus_per_host must be a non-negative integer" \
  "$LAUNCHER" --gpus_per_host=two

# --gpus_per_host: worker i gets --gpu=(i mod n) and --device=cuda. A stand-in
# worker prints the flags it was given.
fake="$TEST_TMPDIR/fake_worker"
printf '#!/bin/sh\necho "args: $*"\n' >"$fake"
chmod +x "$fake"
out=$(timeout 30 "$LAUNCHER" --servers=1 --workers=3 --gpus_per_host=2 --server_bin="$SERVER" \
  --worker_bin="$fake" -- --epochs=1 2>&1)
for want in "worker 0\] args: .*--device=cuda.* --gpu=0" "worker 1\] args: .*--gpu=1" \
            "worker 2\] args: .*--gpu=0"; do
  if grep -qE -- "$want" <<<"$out"; then
    echo "ok   launcher --gpus_per_host: $want"
  else
    echo "FAIL launcher --gpus_per_host: no line matching '$want' in:"
    echo "$out" | head -20
    failures=$((failures + 1))
  fi
done
expect "launcher keeps an explicit --device" 0 "worker 0\] args: .*--device=auto --threads" \
  "$LAUNCHER" --servers=1 --workers=1 --gpus_per_host=1 --server_bin="$SERVER" \
  --worker_bin="$fake" -- --device=auto
expect "launcher refuses --gpu with --gpus_per_host" 2 "--gpu is set per worker" \
  "$LAUNCHER" --gpus_per_host=1 --server_bin="$SERVER" --worker_bin="$fake" -- --gpu=3

echo "$failures failures"
[ "$failures" -eq 0 ]
