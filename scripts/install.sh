#!/usr/bin/env bash
# Install spherepde and everything it needs, on a fresh Debian/Ubuntu machine or an existing one.
#   bash scripts/install.sh          # the package and its runtime dependencies
#   bash scripts/install.sh --test   # ... plus the test dependencies (incl. a CPU PyTorch)
# Idempotent: a second run changes nothing.  System package: FFTW (libfftw3-dev), needed to
# build shtns.  If shtns cannot be built, spherepde is installed without it and runs through
# pyshtools (slower; it says so once at run time).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "install: spherepde needs Python >= 3.11 (tomllib, BaseException.add_note);" \
       "$PY is $("$PY" -V 2>&1 || echo 'not runnable'). Set PYTHON=/path/to/python3.11+" >&2
  exit 2
fi
extras=""
[[ "${1:-}" == "--test" ]] && extras="[test]"

SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
APT_UPDATED=""
apt_install() {  # apt_install PACKAGE WHY: install a Debian package if apt-get exists
  if command -v apt-get >/dev/null 2>&1; then
    echo "install: installing $1 ($2)" >&2
    if [[ -z "$APT_UPDATED" ]]; then  # the package lists once per install
      { $SUDO apt-get update -qq || true; } >/dev/null 2>&1
      APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$1" >/dev/null 2>&1 \
      || echo "install: could not install $1 ($2)" >&2
  else
    echo "install: no apt-get; install $1 yourself ($2)" >&2
  fi
}
have_fftw() { [ -f /usr/include/fftw3.h ] || pkg-config --exists fftw3 2>/dev/null; }
have_fftw || apt_install libfftw3-dev "FFTW headers, to build shtns"
# the CF checker of the tests (tests/io/test_cf.py) needs the udunits2 C library
if [[ -n "$extras" ]] && ! ldconfig -p 2>/dev/null | grep libudunits2 >/dev/null; then  # no -q: under pipefail its early exit fails ldconfig
  apt_install libudunits2-0 "udunits2, for the CF checker cfchecks in the tests"
fi

if ! "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".${extras}"; then
  echo "install: full install failed (most likely shtns could not be built);" \
       "installing without shtns — spherepde will use the slower pyshtools backend" >&2
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps -e .
  deps=$(EXTRAS="$extras" "$PY" - <<'PYEOF'
import os, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = [d.split("#")[0].strip() for d in p["dependencies"] if not d.startswith("shtns")]
if os.environ.get("EXTRAS"):
    deps += p["optional-dependencies"]["test"]
print(" ".join(deps))
PYEOF
)
  # shellcheck disable=SC2086
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore $deps
fi
if [[ -n "$extras" ]]; then
  # PyTorch (and Triton, whose CPU interpreter runs the fused GPU kernel in a test) for the
  # tests of the optional torch attention backend; spherepde itself runs without them, and so
  # do the other tests.  Each is tried once, from a local file first, then from one index with
  # no retries and a short timeout: an unreachable index costs seconds, not minutes.
  pipq=("$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore)
  fast=(--retries 0 --timeout 15)
  skipped=()
  if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    # a CPU build lying in pip's find-links (this project's CI machines have torch 2.13.0 there;
    # --no-deps --no-index looks only there), then its small pure-Python dependencies; else
    # PyTorch's CPU index (~200 MB, not PyPI's multi-GB CUDA build)
    { "${pipq[@]}" --no-deps --no-index "torch==2.13.0" >/dev/null 2>&1 \
        && "${pipq[@]}" "${fast[@]}" "torch==2.13.0" >/dev/null 2>&1; } \
      || "${pipq[@]}" "${fast[@]}" --index-url https://download.pytorch.org/whl/cpu torch \
           >/dev/null 2>&1 \
      || skipped+=("torch (its backend's tests are skipped)")
    if ((${#skipped[@]} == 0)); then
      "${pipq[@]}" "${fast[@]}" "triton>=3.0" >/dev/null 2>&1 \
        || skipped+=("triton (the fused-kernel interpreter test is skipped)")
    fi
  fi
  if ((${#skipped[@]})); then
    echo "install: optional test packages not installed: ${skipped[*]}" >&2
  fi
fi
"$PY" -c "import spherepde, sys; print('spherepde', spherepde.__version__, 'installed for', sys.executable)"
