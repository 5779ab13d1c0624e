#!/bin/sh
# aromba-chore: 1
# name: restic-backup
# description: Back up /etc, /home, /srv and /var/www with restic, encrypted, to the storage you named
# color: green
# touches: /var/cache/aromba-restic
# reads: /home
# reads: /srv
# reads: /var/www
# network: yes
# schedule: daily 03:30
# env: RESTIC_CACHE_DIR=/var/cache/aromba-restic/cache
# end
set -eu
# The settings arrive in the environment (RESTIC_PASSWORD and the storage's
# keys among them): restic reads them there, and no secret is ever an
# argument.
summary=/var/cache/aromba-restic/last-run
if ! command -v restic >/dev/null 2>&1; then
  echo "restic is not installed here: apt-get install restic, then run this again."
  exit 1
fi
# The repository is the storage the PIN allowed, or a folder this chore may
# write (to try it without network), written plainly: anything else would
# be refused by the proxy, or by the cage — and a write the cage refuses is
# an alarm — so it is refused here first, in words.
plainly() {
  case "/$1/" in
    *//* | */./* | */../*) return 1 ;;
  esac
}
case "$RESTIC_REPOSITORY" in
  "s3:https://$S3_HOST/"?*) where="the storage at $S3_HOST" rest=${RESTIC_REPOSITORY#"s3:https://$S3_HOST/"} ;;
  /var/cache/aromba-restic/?*) where="the folder $RESTIC_REPOSITORY" rest=${RESTIC_REPOSITORY#/var/cache/aromba-restic/} ;;
  *) rest=/ ;;
esac
if ! plainly "$rest"; then
  echo "RESTIC_REPOSITORY must be s3:https://$S3_HOST/BUCKET (or a folder under /var/cache/aromba-restic), written plainly (no //, /./ or /../): aromba skill set restic-backup RESTIC_REPOSITORY VALUE"
  exit 1
fi
set --
for p in /etc /home /srv /var/www; do
  [ -d "$p" ] && set -- "$@" "$p"
done
if [ "${AROMBA_DRY_RUN:-}" = 1 ]; then
  echo "would back up $* to $where, encrypted with your password, and keep a summary in $summary"
  exit 0
fi
# Path-style requests: the TLS name is then the storage's own, the one the
# Warden's proxy lets through (a bucket's own name would not be).
lookup=""
if restic options 2>/dev/null | grep -q 's3.bucket-lookup'; then
  lookup="-o s3.bucket-lookup=path"
fi
mkdir -p "$RESTIC_CACHE_DIR"
# shellcheck disable=SC2086 # $lookup is one option or none
if ! restic $lookup cat config >/dev/null 2>&1; then
  restic $lookup init >/dev/null
  echo "made a new repository at $where"
fi
started=$(date -u '+%F %H:%M UTC')
status=0
# shellcheck disable=SC2086
restic $lookup backup --one-file-system --exclude-caches --tag aromba "$@" >"$summary.out" 2>&1 || status=$?
# 3: some files could not be read (one was removed while it ran); the
# snapshot was still made.
case $status in
  0) verdict="Backed up" ;;
  3) verdict="Backed up, with some files unreadable" ;;
  *) verdict="The backup failed (restic exit $status)" ;;
esac
{
  echo "$verdict: $* to $where, started $started."
  grep -E '^(Files|Dirs|Added to the repository|processed|snapshot)' "$summary.out" || tail -n 5 "$summary.out"
} >"$summary"
rm -f "$summary.out"
cat "$summary"
[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
