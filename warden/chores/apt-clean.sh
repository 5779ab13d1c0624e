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
# Regular files in the cache itself, found and moved by find relative to
# the directory it opened, never through a symbolic link (the cache as a
# link, or a *.deb that is one): no path is resolved twice, so nothing
# swapped in between can point the move elsewhere.
debs() {
  find -P "$cache" -xdev -mindepth 1 -maxdepth 1 -type f -name '*.deb' "$@"
}
n=$(debs -printf x | wc -c)
if [ "${1:-}" = --dry-run ]; then
  kib=$(debs -printf '%k\n' | awk '{ s += $1 } END { print s + 0 }')
  echo "would move $n package files ($(numfmt --to=iec --from-unit=1024 "$kib")) from $cache to quarantine"
  exit 0
fi
if [ "$n" -eq 0 ]; then
  echo "the apt cache holds no package files"
  exit 0
fi
dest=/var/lib/aromba-warden/quarantine/apt-clean-$(date +%Y%m%d-%H%M%S)
mkdir -p "$dest"
debs -execdir mv -t "$dest" -- {} +
echo "moved $n package files to $dest"
