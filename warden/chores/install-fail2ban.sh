#!/bin/sh
# aromba-chore: 1
# name: install-fail2ban
# description: Install fail2ban, which bans addresses that keep failing to log in
# color: red
# touches: none
# reads: none
# network: no
# schedule: manual
# action: apt-get install -y fail2ban
# end
# The install is the chore action, run by the Warden outside the cage with
# the policy's fixed apt-get options, after this script ends cleanly.
if [ -x /usr/bin/fail2ban-client ]; then
  echo "fail2ban is installed already; nothing to do" >&2
  exit 3
fi
if [ "$1" = --dry-run ]; then
  echo "would install the package fail2ban (apt-get install -y fail2ban)"
  exit 0
fi
echo "asking for: apt-get install -y fail2ban"
