#!/bin/sh
# aromba-chore: 1
# name: restart-failed
# description: Restart services systemd reports as failed (never Aromba's own or the system's core)
# color: red
# touches: none
# reads: none
# network: no
# schedule: manual
# action: systemctl restart @failed-services
# end
# The Warden fills in @failed-services from `systemctl list-units
# --state=failed`, one restart each, never a service matching never_restart.
if [ "$1" = --dry-run ]; then
  echo "would restart each failed service, one at a time (the receipt lists them)"
  exit 0
fi
echo "asking for a restart of each failed service"
