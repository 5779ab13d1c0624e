#!/bin/sh
# aromba-chore: 1
# name: time-sync
# description: Keep the clock right: network time sync on, and the time-sync service restarted
# color: green
# touches: none
# reads: none
# network: no
# schedule: daily 03:10
# action: timedatectl set-ntp true
# action: systemctl restart systemd-timesyncd.service
# end
# The work is the two chore actions, which the Warden runs outside the cage
# after this script ends cleanly; the script says what they will be.
if [ "$1" = --dry-run ]; then
  echo "would turn network time sync on (timedatectl set-ntp true) and restart systemd-timesyncd"
  exit 0
fi
echo "asking for network time sync on and a restart of systemd-timesyncd"
