#!/bin/sh
# aromba-chore: 1
# name: security-updates
# description: Install the security updates of installed packages
# color: red
# touches: none
# reads: none
# network: no
# schedule: daily 04:15
# action: apt-get install -y --only-upgrade @security-upgrades
# end
# The Warden fills in @security-upgrades from `apt list --upgradable` (the
# packages whose candidate comes from a -security suite) and runs the
# upgrade outside the cage with the policy's fixed apt-get options, after
# this script ends cleanly; a dry run's receipt lists what it would ask for.
if [ "$1" = --dry-run ]; then
  echo "would upgrade the installed packages that have security updates (the receipt lists them)"
  exit 0
fi
echo "asking for the security updates of installed packages"
