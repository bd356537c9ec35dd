#!/usr/bin/env bash
# pytools.sh: prints the path of a python that has AWS's template tools at
# exactly the versions pinned in requirements.txt (cfn-lint,
# aws-sam-translator, moto, boto3). In order of preference:
#   1. the machine's python3, when it has them;
#   2. a virtual environment in the tools cache (TOOLS_DIR), named after
#      the hash of requirements.txt, made and filled with pip the first time
#      (the python3-venv package is installed first when running as root on
#      a Debian-like machine without it).
# Everything it says besides the path goes to stderr.
set -euo pipefail
cd "$(dirname "$0")"
req=requirements.txt
tools_dir=${TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/jobboard-tools}

# has_pins PYTHON: whether PYTHON has every "name==version" of requirements.txt.
has_pins() {
  "$1" - "$req" <<'PY' 2>/dev/null
import re, sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^\s#]+)", line)
    if not m:
        continue
    try:
        if version(m.group(1)) != m.group(3):
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
}

if command -v python3 >/dev/null && has_pins python3; then
  command -v python3
  exit 0
fi

venv="$tools_dir/python-$(sha256sum "$req" | cut -c1-12)"
if [ -x "$venv/bin/python" ] && has_pins "$venv/bin/python"; then
  echo "$venv/bin/python"
  exit 0
fi

echo "pytools: installing $(grep -c '==' "$req") pinned packages into $venv" >&2
mkdir -p "$tools_dir"
rm -rf "$venv" # a half-made one from an interrupted run
if ! python3 -m venv "$venv" >&2; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "pytools: installing python3-venv" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
  else
    echo "pytools: python3 -m venv failed; install python3-venv" >&2
    exit 1
  fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
has_pins "$venv/bin/python" || { echo "pytools: $venv lacks the pinned versions after pip" >&2; exit 1; }
echo "$venv/bin/python"
