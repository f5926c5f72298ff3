#!/usr/bin/env bash
# The README's two quick-start commands on a machine without bubblewrap and chromium, made
# from this one without touching it: a private mount namespace whose /usr, /var and /etc are
# copy-on-write overlays (their changes kept in a tmpfs that vanishes with the namespace),
# where dpkg really removes the two packages. apt-get then really installs them again, into
# the overlay only; the host's bwrap and chromium are never changed.
#
#   sudo benchmarks/fresh_machine.sh [REF]     (root: mounts; REF defaults to HEAD)
#
# In a fresh clone of REF: the main job (README's first command), then `bash .ci/run` (which
# runs README's second command, scripts/test). pip's and uv's download caches of the host
# are kept (what is proved is the set-up, not the network's speed).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
ref="${1:-HEAD}"
[ "$(id -u)" -eq 0 ] || { echo "fresh_machine.sh: run as root (it mounts)" >&2; exit 1; }
work="$(mktemp -d /tmp/fresh-machine.XXXXXX)"   # outside the overlaid trees
chmod 755 "$work"  # mktemp's 0700 would hide the clone from the suite's unprivileged sandbox user
git -C "$repo" worktree list >/dev/null
git clone -q --no-local "$repo" "$work/clone"
git -C "$work/clone" checkout -q "$(git -C "$repo" rev-parse "$ref")"
echo "fresh_machine: clone of $(git -C "$work/clone" rev-parse --short HEAD) at $work/clone"

unshare --mount --propagation private bash -euo pipefail -c '
    work="$1"
    mkdir -p "$work/layers"
    mount -t tmpfs -o size=8g fresh-layers "$work/layers"
    for top in usr var etc; do
        mkdir -p "$work/layers/$top.up" "$work/layers/$top.work"
        mount -t overlay overlay -o "lowerdir=/$top,upperdir=$work/layers/$top.up,workdir=$work/layers/$top.work" "/$top"
    done
    echo "--- before: what this namespace has"
    dpkg --purge --force-depends bubblewrap chromium >/dev/null 2>&1
    apt-get clean  # no .deb left in the cache: apt really downloads them
    for tool in bwrap chromium chromium-browser; do
        printf "%s: %s\n" "$tool" "$(command -v "$tool" || echo absent)"
    done
    dpkg -l bubblewrap chromium 2>&1 | tail -n +6 || true
    cd "$work/clone"
    echo "--- README command 1 (the main job)"
    start=$(date +%s)
    ( python3 -m venv .venv && . .venv/bin/activate && pip install -q -e . && hermes-replay replay cassettes ) > "$work/main-job.log" 2>&1 \
        || { tail -n 20 "$work/main-job.log"; echo "main job failed"; exit 1; }
    echo "main job: exit 0 in $(( $(date +%s) - start )) s; last lines:"
    tail -n 3 "$work/main-job.log"
    echo "--- bash .ci/run (README command 2: ./scripts/test)"
    start=$(date +%s)
    set +e
    CI=true bash .ci/run > "$work/ci-run.log" 2>&1
    rc=$?
    set -e
    echo ".ci/run: exit $rc in $(( $(date +%s) - start )) s"
    grep -E "^scripts/test|^Setting up (bubblewrap|chromium) " "$work/ci-run.log" || true
    tail -n 2 "$work/ci-run.log"
    echo "--- after: bwrap $(command -v bwrap || echo absent), chromium $(command -v chromium || echo absent)"
    exit $rc
' fresh "$work"
rc=$?
echo "--- host untouched: bwrap $(command -v bwrap || echo absent), chromium $(command -v chromium || echo absent)"
echo "logs: $work/main-job.log $work/ci-run.log"
exit $rc
