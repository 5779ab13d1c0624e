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
list() {
  find /var/log -xdev -type f -mtime +"$KEEP_DAYS" \
    \( -name '*.gz' -o -name '*.xz' -o -name '*.zst' -o -name '*.[1-9]' \) \
    -not -path '/var/log/journal/*' -print
}
n=$(list | wc -l)
if [ "${1:-}" = --dry-run ]; then
  size=$(list | tr '\n' '\0' | du -ch --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
  echo "would move $n rotated log files older than $KEEP_DAYS days (${size:-0}) from /var/log to quarantine"
  exit 0
fi
if [ "$n" -eq 0 ]; then
  echo "no rotated log files older than $KEEP_DAYS days"
  exit 0
fi
dest=/var/lib/aromba-warden/quarantine/old-logs-$(date +%Y%m%d-%H%M%S)
list | while IFS= read -r f; do
  mkdir -p "$dest$(dirname "$f")"
  mv "$f" "$dest$f"
done
echo "moved $n rotated log files to $dest"
