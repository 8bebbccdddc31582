#!/bin/sh
# Installs what the suite's Erlang and Go peers need, when missing: `escript`
# (Debian's erlang-base) and `go` (golang-go). Without them the suite still runs and
# prints a SKIPPED line for those rows. Needs root (apt-get); non-interactive.
#
#     sh bench/tools/install-peers.sh
set -eu

missing=""
command -v escript >/dev/null 2>&1 || missing="$missing erlang-base"
command -v go >/dev/null 2>&1 || missing="$missing golang-go"
if [ -z "$missing" ]; then
    echo "escript and go are already installed"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    sudo=sudo
else
    sudo=
fi
$sudo apt-get update -q
# shellcheck disable=SC2086 # one word per package
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
