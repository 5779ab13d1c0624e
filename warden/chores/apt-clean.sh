#!/bin/sh
# aromba-chore: 1
# name: apt-clean
# description: Move downloaded package files out of apt's cache into quarantine
# color: green
# touches: /var/cache/apt/archives
# touches: /var/lib/aromba-warden/quarantine
# reads: none
# network: no
# schedule: weekly sun 04:00
# end
set -eu
cache=/var/cache/apt/archives
n=0
for f in "$cache"/*.deb; do
  [ -e "$f" ] && n=$((n + 1))
done
if [ "${1:-}" = --dry-run ]; then
  echo "would move $n package files ($(du -ch "$cache"/*.deb 2>/dev/null | tail -n 1 | cut -f1 || echo 0)) from $cache to quarantine"
  exit 0
fi
if [ "$n" -eq 0 ]; then
  echo "the apt cache holds no package files"
  exit 0
fi
dest=/var/lib/aromba-warden/quarantine/apt-clean-$(date +%Y%m%d-%H%M%S)
mkdir -p "$dest"
mv "$cache"/*.deb "$dest"/
echo "moved $n package files to $dest"
