#!/bin/sh
# aromba-chore: 1
# name: nginx-restart
# description: Have the Warden restart nginx, so that it serves with its configuration as it is now
# color: yellow
# touches: none
# network: no
# schedule: manual
# action: systemctl restart nginx
# end
set -eu
# The Warden's policy lets a chore ask for a restart, not a reload: open
# connections are dropped, and a configuration nginx cannot load keeps it
# down until it is fixed. Test it first: the assistant runs nginx -t (a read
# the Warden allows, outside any cage). No cage can test it here: nginx
# would open its logs to write and read the certificates' keys, which the
# cage does not show.
if ! command -v nginx >/dev/null 2>&1; then
  echo "nginx is not installed here: nothing to restart."
  exit 1
fi
if [ "${AROMBA_DRY_RUN:-}" = 1 ]; then
  echo "would have the Warden restart nginx (systemctl restart nginx): the connections open now are dropped, and a configuration nginx cannot load keeps it down, so have it tested first (ask: is nginx's configuration valid?)"
  exit 0
fi
echo "nginx is installed; the Warden now restarts it"
