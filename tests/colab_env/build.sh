#!/usr/bin/env bash
# Build (once) a clean virtual environment that mimics Colab's widget stack:
# ipywidgets 7.7.1 + widgetsnbextension 3.x, matplotlib 3.10, numpy 2.1, plus
# course_utils installed with --no-deps (as the notebooks' Colab set-up cell does).
#
#   tests/colab_env/build.sh [VENV_DIR]      default: build/colab-env
#
# COLAB_ENV_PYTHON picks the interpreter (default: python3). The venv is
# clean (no --system-site-packages), so the ipywidgets 8 of the main
# environment can never leak in. Re-running reuses a complete venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${1:-${COLAB_ENV:-build/colab-env}}"
PY="${COLAB_ENV_PYTHON:-python3}"
STAMP="$VENV/.complete"
REQS=tests/colab_env/requirements.txt
if [[ -f "$STAMP" ]] && cmp -s "$STAMP" "$REQS"; then
    echo "colab-env: reusing $VENV"
    exit 0
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -r "$REQS"
"$VENV/bin/python" -m pip install -q --no-deps -e .
"$VENV/bin/python" - <<'PY'
import ipywidgets, widgetsnbextension, matplotlib, numpy, torch, course_utils
print(f"colab-env: ipywidgets {ipywidgets.__version__}, widgetsnbextension {widgetsnbextension.__version__}, "
      f"matplotlib {matplotlib.__version__}, numpy {numpy.__version__}, torch {torch.__version__}")
assert ipywidgets.__version__ == "7.7.1", ipywidgets.__version__
assert widgetsnbextension.__version__.startswith("3."), widgetsnbextension.__version__
PY
cp "$REQS" "$STAMP"
