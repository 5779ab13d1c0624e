#!/usr/bin/env bash
# Installs Aromba's host side (the Worker `aromba` and the Warden
# `aromba-warden`) on a Debian or Ubuntu server, as root:
#
#   curl -fsSL https://aro.mba/install.sh | sudo bash
#
# It downloads the release's manifest and its signature, verifies the
# signature with minisign against the public keys written below, then
# every tarball's SHA-256 and size against the manifest, before anything
# is unpacked or moved; makes the system user aromba; unpacks into
# /opt/aromba/releases/<version>/ and points /opt/aromba/current at it;
# writes and enables the systemd units; runs `aromba-warden install`; and
# tells you to run `aromba pair`. Running it again is harmless.
#
# Options (also as environment variables):
#   --base-url URL   where the release is (AROMBA_RELEASE_URL); https://,
#                    or http:// to 127.0.0.1 only
#   --channel NAME   the channel to install from (AROMBA_CHANNEL, stable)
#   --root DIR       install under DIR instead of / (tests; systemd units
#                    are written but nothing is started)
#
# The whole script is one function, called on its last line: under
# `curl | bash` a download cut short is a function never called (or a
# syntax error), never half an install. scripts/release checks it is so.
set -euo pipefail

main() {

# The release public keys (minisign): the current one and the standby.
# The release script writes them here; a copy without them refuses.
RELEASE_KEYS=(@RELEASE_KEYS@)

say() { printf '==> %s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

base_url=${AROMBA_RELEASE_URL:-https://aro.mba/releases}
channel=${AROMBA_CHANNEL:-stable}
root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base-url) base_url=${2:-}; shift 2 ;;
    --channel) channel=${2:-}; shift 2 ;;
    --root) root=${2:-}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1; try --help" ;;
  esac
done
systemctl=${AROMBA_SYSTEMCTL:-systemctl}

[ "$(id -u)" -eq 0 ] || die "run this as root (sudo bash install.sh)"
case "${RELEASE_KEYS[*]}" in
  *@RELEASE_KEYS@* | "") die "this copy of install.sh carries no release key; use the one published with a release" ;;
esac
[[ "$channel" =~ ^[a-z0-9_]{1,32}$ ]] || die "--channel must be a plain name"
case "$base_url" in
  https://*) ;;
  http://127.0.0.1:* | http://127.0.0.1/*) ;;
  *) die "--base-url must be https:// (or http:// to 127.0.0.1)" ;;
esac
base_url=${base_url%/}/$channel
# It is written into network.toml as a TOML string: plain characters only.
[[ "$base_url" =~ ^https?://[A-Za-z0-9._~:/-]+$ ]] && [[ "$base_url" != *..* ]] \
  || die "--base-url holds characters a release URL does not"
if [ -n "$root" ]; then
  case "$root" in /*) ;; *) die "--root must be an absolute path" ;; esac
  root=${root%/}
fi

missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v minisign >/dev/null 2>&1 || missing+=(minisign)
command -v sha256sum >/dev/null 2>&1 || missing+=(coreutils)
command -v useradd >/dev/null 2>&1 || missing+=(passwd)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "install ${missing[*]} first (this script uses apt-get)"
  say "installing ${missing[*]}"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "could not install ${missing[*]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Hard limits: a manifest is small, a tarball at most 64 MiB.
fetch() {
  curl --fail --silent --show-error --location --proto '=https,http' --proto-redir '=https' --max-redirs 3 \
    --connect-timeout 20 --max-time 600 --max-filesize "$3" -o "$work/$2" "$base_url/$1" \
    || die "could not download $base_url/$1"
}

say "downloading the release manifest from $base_url"
fetch manifest.json manifest.json 16384
fetch manifest.json.minisig manifest.json.minisig 4096
verified=false
for key in "${RELEASE_KEYS[@]}"; do
  if minisign -Vqm "$work/manifest.json" -x "$work/manifest.json.minisig" -P "$key" >/dev/null 2>&1; then
    verified=true
    break
  fi
done
$verified || die "the manifest's signature does not verify with the release keys: nothing was installed"

# The manifest is the release script's, now verified: one field a line.
field() { grep -o "\"$1\": *[^,}]*" "$work/manifest.json" | head -n 1 | sed 's/^[^:]*: *//; s/"//g'; }
version=$(field version)
[[ "$version" =~ ^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$ ]] || die "the manifest's version is malformed"
[ "$(field format)" = 1 ] || die "the manifest's format is not one this script reads"
[ "$(field channel)" = "$channel" ] || die "the manifest is for the $(field channel) channel, not $channel"
[ "$(field arch)" = "$(uname -m)" ] || die "the release is built for $(field arch), this machine is $(uname -m)"
expires=$(field expires)
[[ "$expires" =~ ^[0-9]{1,12}$ ]] && [ "$expires" -gt "$(date +%s)" ] \
  || die "the manifest has expired: the release folder is serving an old release list (stale, or holding updates back)"
# Releases are signed for 14 days at most (a day's slack for clocks).
[ "$expires" -le "$(($(date +%s) + 15 * 86400))" ] \
  || die "the manifest claims to be valid for more than 15 days: releases are signed for 14 at most"

binaries=(aromba aromba-warden)
for b in "${binaries[@]}"; do
  line=$(grep -o "{\"binary\": \"$b\"[^}]*}" "$work/manifest.json") || die "the manifest does not name $b"
  tarball=$(sed 's/.*"tarball": "\([^"]*\)".*/\1/' <<<"$line")
  sha=$(sed 's/.*"sha256": "\([0-9a-f]*\)".*/\1/' <<<"$line")
  size=$(sed 's/.*"size": \([0-9]*\).*/\1/' <<<"$line")
  [[ "$tarball" =~ ^[a-z0-9][a-z0-9._-]{0,120}\.tar\.gz$ ]] && [[ "$tarball" != *..* ]] || die "the manifest names an odd tarball for $b"
  [[ "$sha" =~ ^[0-9a-f]{64}$ ]] && [[ "$size" =~ ^[1-9][0-9]{0,7}$ ]] || die "the manifest's entry for $b is malformed"
  say "downloading $tarball"
  fetch "$tarball" "$b.tar.gz" "$size"
  [ "$(stat -c %s "$work/$b.tar.gz")" = "$size" ] || die "$tarball is not the size the manifest says"
  [ "$(sha256sum "$work/$b.tar.gz" | awk '{print $1}')" = "$sha" ] || die "$tarball's SHA-256 is not the manifest's"
  # Exactly one regular file, named after the binary, or nothing at all.
  listing=$(tar -tvzf "$work/$b.tar.gz") || die "$tarball is not a tar archive"
  [ "$(wc -l <<<"$listing")" = 1 ] || die "$tarball holds more than its one binary"
  [[ "$listing" == -* ]] || die "$tarball's entry is not a regular file"
  [ "$(tar -tzf "$work/$b.tar.gz")" = "$b" ] || die "$tarball's entry is not $b alone"
done

opt=$root/opt/aromba
release=$opt/releases/$version
if [ -n "$root" ]; then
  state=$root/state/baseline.json
else
  state=/var/lib/aromba-warden/state/baseline.json
fi
current=$(readlink "$opt/current" 2>/dev/null || true)
# An installed Warden watches its binaries: another release goes through
# it (`aromba update`), never around it.
if [ -e "$state" ] && [ -n "$current" ] && [ "$current" != "releases/$version" ]; then
  die "Aromba ${current#releases/} is installed; install $version with \`aromba update\`"
fi
say "installing $version into $release"
if ! id aromba >/dev/null 2>&1; then
  useradd --system --home-dir /var/lib/aromba --no-create-home --shell /usr/sbin/nologin aromba \
    || die "could not make the system user aromba"
  say "made the system user aromba"
fi
mkdir -p "$opt/releases"
chmod 755 "$opt" "$opt/releases"
if [ -d "$release" ] && cmp -s <(tar -xzOf "$work/aromba.tar.gz") "$release/aromba" \
  && cmp -s <(tar -xzOf "$work/aromba-warden.tar.gz") "$release/aromba-warden"; then
  say "$version is already unpacked"
else
  rm -rf "$release.new"
  mkdir -m 755 "$release.new"
  for b in "${binaries[@]}"; do
    tar -xzf "$work/$b.tar.gz" -C "$release.new" --no-same-owner --no-same-permissions "$b"
    chown root:root "$release.new/$b"
    chmod 755 "$release.new/$b"
  done
  rm -rf "$release"
  mv -T "$release.new" "$release"
fi
if [ "$current" != "releases/$version" ]; then
  if [ -n "$current" ]; then ln -sfn "$current" "$opt/.previous.new" && mv -T "$opt/.previous.new" "$opt/previous"; fi
  ln -sfn "releases/$version" "$opt/.current.new"
  mv -T "$opt/.current.new" "$opt/current"
fi

units=$root/etc/systemd/system
mkdir -p "$units"
say "writing the systemd units into $units"
@UNITS@

# The Worker's daily update check looks where this script found the
# release; `aromba pair` lists its host among those the Worker may reach.
if [ -n "$root" ]; then
  worker_conf=$root/worker
else
  worker_conf=/etc/aromba/worker
fi
if [ ! -e "$worker_conf/network.toml" ]; then
  mkdir -p "$worker_conf"
  chmod 755 "$worker_conf"
  printf '# Where the Aromba Worker may connect. Root'"'"'s file; `aromba pair` adds\n# the relay and the release host.\nreleases = "%s"\n' "$base_url" \
    > "$worker_conf/network.toml.new"
  chmod 644 "$worker_conf/network.toml.new"
  mv -T "$worker_conf/network.toml.new" "$worker_conf/network.toml"
fi

if [ -n "$root" ]; then
  warden_args=(--root "$root" --worker-bin "$opt/current/aromba")
else
  warden_args=(--worker-bin "$opt/current/aromba")
fi
if [ -e "$state" ]; then
  say "the Warden is installed already (its baseline is kept)"
else
  "$opt/current/aromba-warden" install "${warden_args[@]}" || die "aromba-warden install failed"
fi
if [ -z "$root" ]; then
  $systemctl daemon-reload
  $systemctl enable --now aromba-warden.service
  $systemctl enable aromba.service
else
  say "installed under $root: the services are not started"
fi

cat <<EOF

Aromba $version is installed. Now pair this server with your Telegram chat:

    sudo aromba pair

EOF
if [ -z "$root" ] && [ ! -e /usr/local/bin/aromba ]; then
  ln -s /opt/aromba/current/aromba /usr/local/bin/aromba
fi
}

main "$@"
