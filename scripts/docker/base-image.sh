#!/usr/bin/env bash
# Build a local stand-in for python:3.11-slim with debootstrap, for machines without an image hub.
#   scripts/docker/base-image.sh TAG
# Debian bookworm (Python 3.11) plus python3-venv and python3-pip. This machine's extra CA files
# (/usr/local/share/ca-certificates/, e.g. a TLS-intercepting proxy's) are trusted inside the
# image, so pip and apt in builds based on it reach the registries the host reaches. That is a
# property of this machine: the project Dockerfile itself copies no certificates.
set -euo pipefail
tag=${1:?usage: base-image.sh TAG}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/rag-base.XXXXXX)
trap 'rm -rf "$root"' EXIT

echo "[base] debootstrap bookworm into $root" >&2
debootstrap --variant=minbase --include=ca-certificates,python3,python3-venv,python3-pip \
  bookworm "$root" "$mirror" >/dev/null

cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
SOURCES
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
# Keep the image small like the -slim images: no apt lists, caches or docs.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
  "$root"/usr/share/man/*
ln -sf python3 "$root/usr/bin/python"

# requests/httpx/huggingface_hub read their CA bundle from these variables, not the system store.
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["python3"]' \
  - "$tag" >/dev/null
echo "[base] $tag: $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')" >&2
