"""Can numba use Intel's SVML here?  Run in a virtual environment that has
`pip install intel-cmplr-lib-rt` (the runtime numba looks for) and writes what numba reports.

    python3 -m venv --system-site-packages /tmp/svml && /tmp/svml/bin/pip install intel-cmplr-lib-rt
    /tmp/svml/bin/python docs/prototypes/issue23/svml_probe.py   # writes svml_probe.json here
"""
import json
import platform
from importlib import metadata
from pathlib import Path

import llvmlite
import numba
from numba.misc import numba_sysinfo

info = numba_sysinfo.get_sysinfo()
out = {"numba": numba.__version__, "llvmlite": llvmlite.__version__, "python": platform.python_version(),
       "intel_cmplr_lib_rt": None, **{k: info[k] for k in info if "SVML" in k}}
try:
    out["intel_cmplr_lib_rt"] = metadata.version("intel-cmplr-lib-rt")
except metadata.PackageNotFoundError:
    pass
out["using_svml"] = bool(numba.config.USING_SVML)
Path(__file__).with_suffix(".json").write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out, indent=1))
