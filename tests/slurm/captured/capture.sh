#!/usr/bin/env bash
# Re-captures the files beside this script from a running test cluster (docs/slurm.md,
# "Trying it on one machine"): SLURM_CONF=... bash capture.sh. Each command's stdout,
# stderr and exit status go to NAME.out, NAME.err, NAME.rc; job ids are whatever the
# cluster hands out, so the tests read them from the captures, never assume them.
set -u
cd "$(dirname "$0")"
work=$(mktemp -d)
cap() { local name=$1; shift; "$@" >"$name.out" 2>"$name.err"; echo $? >"$name.rc"; }
until_state() { # JOB STATE [SECONDS]: wait until scontrol says JobState=STATE
  for _ in $(seq $((${3:-60} * 10))); do
    scontrol show job -o "$1" 2>/dev/null | grep -q "JobState=$2 " && return 0; sleep 0.1
  done; echo "job $1 never reached $2" >&2; return 1; }

cap sbatch_plain sbatch --parsable -o "$work/%j.out" --wrap 'sleep 300'
plain=$(cat sbatch_plain.out)
cap sbatch_array sbatch --parsable --array=0-5%2 -o "$work/%A_%a.out" --wrap 'sleep 300'
array=$(cat sbatch_array.out)
cap sbatch_gres sbatch --parsable --gres=gpu:2 -N2 -o "$work/%j.out" --wrap 'sleep 300'
gres=$(cat sbatch_gres.out)
cap sbatch_big sbatch --parsable -n 8 -J "name with spaces" -o "$work/%j.out" --wrap 'sleep 300'
big=$(cat sbatch_big.out)
sbatch --parsable -n 8 -o "$work/%j.out" --wrap 'sleep 300' >behind_big.id
until_state "$plain" RUNNING; until_state "${array}_1" RUNNING; until_state "$gres" RUNNING
cap squeue_mixed squeue --noheader --array --format='%i|%F|%K|%T|%r|%N|%j'
cap scontrol_running scontrol show job --oneliner "$plain"
cap scontrol_array_task scontrol show job --oneliner "${array}_1"
cap scontrol_array_all scontrol show job --oneliner "$array"
cap scontrol_gres scontrol show job --oneliner "$gres"
cap scontrol_pending_resources scontrol show job --oneliner "$big"
cap scontrol_pending_priority scontrol show job --oneliner "$(cat behind_big.id)"
scancel "$array" "$gres" "$big" "$(cat behind_big.id)"; rm behind_big.id
cap requeue_running scontrol requeue "$plain"
until_state "$plain" PENDING
cap scontrol_requeued scontrol show job --oneliner "$plain"
cap requeue_pending scontrol requeue "$plain"
scancel "$plain"; until_state "$plain" CANCELLED
cap scontrol_cancelled scontrol show job --oneliner "$plain"
cap sbatch_fail sbatch --parsable -o "$work/%j.out" --wrap 'exit 3'
until_state "$(cat sbatch_fail.out)" FAILED
cap scontrol_failed scontrol show job --oneliner "$(cat sbatch_fail.out)"
cap sbatch_ok sbatch --parsable -o "$work/%j.out" --wrap 'true'
until_state "$(cat sbatch_ok.out)" COMPLETED
cap scontrol_completed scontrol show job --oneliner "$(cat sbatch_ok.out)"
cap sbatch_timeout sbatch --parsable --time=0:01 -o "$work/%j.out" --wrap 'sleep 300'
# Slurm enforces limits in whole minutes, checked every 30 s: this takes 60-90 s
until_state "$(cat sbatch_timeout.out)" TIMEOUT 150
cap scontrol_timeout scontrol show job --oneliner "$(cat sbatch_timeout.out)"
cap sbatch_bad_partition sbatch --parsable -p nope --wrap true
cap sbatch_bad_gres sbatch --parsable --gres=gpu:3 --wrap true
cap sbatch_unknown_gres sbatch --parsable --gres=tpu:1 --wrap true
cap sbatch_bad_time sbatch --parsable --time=abc --wrap true
cap sbatch_bad_mem sbatch --parsable --mem=100000 --wrap true
cap testonly_ok sbatch --test-only --gres=gpu:1 --wrap true
cap testonly_bad_gres sbatch --test-only --gres=gpu:5 --wrap true
cap testonly_bad_partition sbatch --test-only -p nope --wrap true
cap scontrol_unknown scontrol show job --oneliner 999999
cap squeue_unknown squeue --noheader --jobs=999999 --format='%i|%F|%K|%T|%r|%N|%j'
cap scancel_unknown scancel 999999
cap requeue_unknown scontrol requeue 999999
cap sinfo_partitions sinfo --noheader --format='%R|%a|%D|%G'
rm -rf "$work"
