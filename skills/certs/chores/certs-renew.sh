#!/bin/sh
# aromba-chore: 1
# name: certs-renew
# description: Have certbot renew the certificates that expire within 30 days, with its own renewal service
# color: yellow
# touches: none
# network: no
# schedule: manual
# action: systemctl restart certbot
# end
set -eu
# certbot keeps its account key and the certificates' keys under
# /etc/letsencrypt, which no cage shows: it renews outside the cage, as its
# own timer already runs it twice a day (certbot.service: certbot -q
# renew). This chore checks it is there; the Warden then starts that
# service, after this clean run, judged by its policy.
unit=""
for d in /lib/systemd/system /usr/lib/systemd/system /etc/systemd/system; do
  [ -f "$d/certbot.service" ] && unit="$d/certbot.service"
done
if ! command -v certbot >/dev/null 2>&1 || [ -z "$unit" ]; then
  echo "certbot is not installed here (no certbot and no certbot.service): apt-get install certbot, then get a certificate with it first."
  exit 1
fi
if [ "${AROMBA_DRY_RUN:-}" = 1 ]; then
  echo "would have the Warden start certbot's renewal service ($unit: certbot -q renew), which renews the certificates that expire within 30 days and leaves the others"
  exit 0
fi
echo "certbot is installed; the Warden now starts its renewal service (certbot -q renew)"
