#!/bin/sh
# aromba-chore: 1
# name: old-logs
# description: Move rotated logs older than 30 days out of /var/log into quarantine
# color: yellow
# touches: /var/log
# touches: /var/lib/aromba-warden/quarantine
# reads: none
# network: no
# schedule: weekly sun 04:30
# env: KEEP_DAYS=30
# end
set -eu
# Rotated files only: compressed (.gz, .xz, .zst) or numbered (.1 … .9).
# A service user may own a directory here, or write one /var/log shares
# with its group: nothing it plants may steer the move. So find walks by
# descriptor and never follows a symbolic link (-P), stays on this
# filesystem (-xdev), does not descend into a directory root does not own
# (root without capabilities cannot move anything out of one anyway), and
# names each file to its command relative to the directory it found it in
# (-execdir): no path is ever printed, read back and resolved again, so
# neither a directory swapped for a link nor a name with a newline in it
# can point the move elsewhere.
walk() {
  find -P /var/log -xdev \
    \( -type d \( ! -user 0 -o -path /var/log/journal \) -prune \) -o \
    \( -type f -mtime +"$KEEP_DAYS" \
    \( -name '*.gz' -o -name '*.xz' -o -name '*.zst' -o -name '*.[1-9]' \) \
    "$@" \)
}
n=$(walk -printf x | wc -c)
if [ "${1:-}" = --dry-run ]; then
  kib=$(walk -printf '%k\n' | awk '{ s += $1 } END { print s + 0 }')
  size=$(numfmt --to=iec --from-unit=1024 "$kib")
  echo "would move $n rotated log files older than $KEEP_DAYS days ($size) from /var/log to quarantine"
  exit 0
fi
if [ "$n" -eq 0 ]; then
  echo "no rotated log files older than $KEEP_DAYS days"
  exit 0
fi
dest=/var/lib/aromba-warden/quarantine/old-logs-$(date +%Y%m%d-%H%M%S)
# In the directory find opened: its real path (pwd -P asks the kernel, not
# a path string) names the place in quarantine; the files move by name.
walk -execdir sh -c 'd=$(pwd -P); mkdir -p "$0$d" && mv -- "$@" "$0$d/"' "$dest" {} +
echo "moved $n rotated log files to $dest"
