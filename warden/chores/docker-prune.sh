#!/bin/sh
# aromba-chore: 1
# name: docker-prune
# description: Remove Docker's dangling images and the build cache no container uses
# color: yellow
# touches: none
# reads: none
# network: no
# schedule: weekly sun 05:00
# action: docker image prune -f
# action: docker builder prune -f
# end
# The cage refuses Unix sockets, so this script cannot reach Docker: the work
# is the two chore actions the Warden runs outside the cage after it ends.
if [ "$1" = --dry-run ]; then
  echo "would remove dangling images (docker image prune -f) and unused build cache (docker builder prune -f)"
  exit 0
fi
if ! [ -x /usr/bin/docker ]; then
  echo "Docker is not installed here; nothing to do" >&2
  exit 3
fi
echo "asking for: docker image prune -f; docker builder prune -f"
