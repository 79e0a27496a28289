#!/usr/bin/env bash
# Installs what raas needs beyond npm, then the npm packages and the build. Idempotent.
# As root: Debian packages (bubblewrap, tmux, git, python3; slirp4netns for network-enabled
# sandboxes; seccomp's scmp_sys_resolver, which the tests use to check our syscall table; python3-numpy
# and python3-torch for the Python bridge's conformance tests, python3-venv and python3-setuptools for
# its install; chromium for the console's browser tests; the image tools below) and the unprivileged
# sandbox user.
# Without root: installs nothing system-wide and prints what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SANDBOX_USER="${RAAS_SANDBOX_USER:-raas-sandbox}"
declare -A PKG_OF=([bwrap]=bubblewrap [tmux]=tmux [git]=git [slirp4netns]=slirp4netns [pasta]=passt [scmp_sys_resolver]=seccomp
  [patchelf]=patchelf [umoci]=umoci [skopeo]=skopeo [unsquashfs]=squashfs-tools [mmdebstrap]=mmdebstrap [fuse-overlayfs]=fuse-overlayfs)
missing=()
# Image-rooted sandboxes: patchelf (the host's node run inside any image), unsquashfs (.sif), umoci
# (OCI layouts), skopeo (docker save archives), fuse-overlayfs (the overlay on kernels older than
# 6.6); the tests build their images with mmdebstrap and busybox-static.
for bin in bwrap tmux git slirp4netns pasta scmp_sys_resolver patchelf umoci skopeo unsquashfs mmdebstrap fuse-overlayfs; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${PKG_OF[$bin]}")
done
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
[ -x /usr/bin/python3 ] || missing+=(python3)
# numpy and torch for the Python bridge's conformance tests (bridges/python/tests)
for mod in numpy torch; do /usr/bin/python3 -c "import $mod" >/dev/null 2>&1 || missing+=("python3-$mod"); done
# pytest for the swe grading tests (pytest-run instances and the Debian-patch fixture)
/usr/bin/python3 -c "import pytest" >/dev/null 2>&1 || missing+=(python3-pytest)
# venv (with pip) and setuptools: the Python bridge's documented install on Debian 12 (PEP 668)
/usr/bin/python3 -c "import ensurepip, venv" >/dev/null 2>&1 || missing+=(python3-venv)
/usr/bin/python3 -c "import setuptools" >/dev/null 2>&1 || missing+=(python3-setuptools)
# chromium for the console's browser tests (driven by playwright-core; no browser download)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# the security suite's hostile images: setcap (file capabilities) and gcc with libc headers (a
# library that records who loads it)
command -v setcap >/dev/null 2>&1 || [ -x /usr/sbin/setcap ] || [ -x /sbin/setcap ] || missing+=(libcap2-bin)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -f /usr/include/stdio.h ] || missing+=(libc6-dev)

if [ "$(id -u)" = 0 ]; then
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ! id -u "$SANDBOX_USER" >/dev/null 2>&1; then
    echo "setup: creating sandbox user $SANDBOX_USER"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$SANDBOX_USER"
  fi
  mkdir -p /var/tmp/raas && chmod 755 /var/tmp/raas
  # Network sandboxes: slirp4netns opens /dev/net/tun as the sandbox user (container images often
  # ship it 0600 root; udev's default is 0666).
  if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
    chgrp "$SANDBOX_USER" /dev/net/tun && chmod 0660 /dev/net/tun
  fi
else
  [ ${#missing[@]} -gt 0 ] && echo "setup: not root, could not install: ${missing[*]} (sudo apt-get install ${missing[*]})"
  echo "setup: not root; sandboxes run as $(id -un) through unprivileged user namespaces"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npm run build --silent
echo "setup: ok"
