#!/bin/sh
# aromba-chore: 1
# name: journal-vacuum
# description: Shrink the system journal's archived files to a size
# color: green
# touches: /var/log/journal
# reads: none
# network: no
# schedule: weekly sun 03:20
# env: JOURNAL_MAX=500M
# end
set -eu
dir=/var/log/journal
if [ ! -d "$dir" ]; then
  echo "no persistent journal here; nothing to do"
  exit 0
fi
if [ "${1:-}" = --dry-run ]; then
  echo "would shrink the archived journal files in $dir to $JOURNAL_MAX; they take $(du -sh "$dir" | cut -f1) now"
  exit 0
fi
journalctl --directory="$dir" --vacuum-size="$JOURNAL_MAX" 2>&1
