#!/usr/bin/env bash
# Installs headless Chromium for the e2e browser test
# (test/e2e/ui_browser_test.go, docs/testing.md) from Debian's package
# `chromium`. Idempotent: does nothing when chromium is already on $PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
	chromium --version 2>/dev/null || true
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install-chromium: not root and no sudo: install the Debian package 'chromium' yourself" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
chromium --version
