#!/bin/sh
# aromba-chore: 1
# name: restic-prune
# description: Forget backups past 7 daily, 5 weekly and 12 monthly ones, and free their space in the storage
# color: yellow
# touches: /var/cache/aromba-restic
# network: yes
# schedule: manual
# env: RESTIC_CACHE_DIR=/var/cache/aromba-restic/cache
# end
set -eu
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
keep="--keep-daily 7 --keep-weekly 5 --keep-monthly 12"
if [ "${AROMBA_DRY_RUN:-}" = 1 ]; then
  echo "would forget the backups tagged aromba past 7 daily, 5 weekly and 12 monthly ones in $RESTIC_REPOSITORY and prune what no backup kept needs"
  exit 0
fi
lookup=""
if restic options 2>/dev/null | grep -q 's3.bucket-lookup'; then
  lookup="-o s3.bucket-lookup=path"
fi
mkdir -p "$RESTIC_CACHE_DIR"
# shellcheck disable=SC2086 # $lookup is one option or none; $keep is three
restic $lookup forget --tag aromba $keep --prune
