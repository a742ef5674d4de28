#!/usr/bin/env bash
# Build the Colab stand-in (ipywidgets 7.7.1) once, then run every solution
# notebook in it and drive every explorer. Exit status 1 on any failure.
#   tests/colab_env/run.sh [LESSON ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${COLAB_ENV:-build/colab-env}"
bash tests/colab_env/build.sh "$VENV"
"$VENV/bin/python" tests/colab_env/check.py --expect-ipywidgets 7.7.1 "$@"
