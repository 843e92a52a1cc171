#!/usr/bin/env bash
# Makes sure Debian's headless Chromium and its WebDriver (chromedriver) are installed, for the
# console's browser tests (crates/vow-server/tests/it/console.rs). Exits non-zero (so those tests
# fail rather than skip) when they cannot be installed.
set -euo pipefail
ready() { command -v chromedriver >/dev/null && command -v chromium >/dev/null; }
ready && exit 0
echo "Chromium is not installed; installing chromium and chromium-driver from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q && apt-get install -y -q chromium chromium-driver
ready || { echo "chromium or chromedriver is still missing" >&2; exit 1; }
chromedriver --version
