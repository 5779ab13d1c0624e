#!/bin/sh
# When the last backup ran, what it saved and how it ended, as the backup
# chore wrote it (this tool reads; it never reaches the storage).
summary=/var/cache/aromba-restic/last-run
if [ -f "$summary" ]; then
  cat "$summary"
else
  echo "No backup has run yet (the chore restic-backup runs daily at 03:30 once its settings are set and its dry run was seen)."
fi
echo "Repository: ${RESTIC_REPOSITORY:-not set}"
