# Source on the device machine (no network): install the carried wheels (.whl/, made by
# ../shared/device/wheels.sh) and tunesearch, editable, against the machine's torch and triton.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 || return 1
