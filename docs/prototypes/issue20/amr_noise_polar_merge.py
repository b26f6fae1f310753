"""Issue 20, item 5: is the polar merging of the amr base rows why `validate sync-path --scheme
amr` leaves its band?  The same case as docs/data/amr_sync_path/one_cluster.json
(`--realisation 1`, base 24, max_level 4, mass_per_cell 10) with every base cell refinable
(``AMRDensity(polar_merge=1)``; sync-path has no option for it, so the default is set here).

    python3 docs/prototypes/issue20/amr_noise_polar_merge.py 1 4.5 OUT_FOLDER OUT.json
"""
from __future__ import annotations

import contextlib
import io
import json
import sys

import spherepde.solvers.eulerian.amr as amr

_init = amr.AMRDensity.__init__


def main() -> int:
    polar_merge, t_end, folder, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

    def init(self, *a, **k):
        k.setdefault("polar_merge", polar_merge)
        _init(self, *a, **k)

    amr.AMRDensity.__init__ = init
    from spherepde.cli import main as cli

    args = ["validate", "sync-path", "--json", "--scheme", "amr", "--realisation", "1", "--t-end", t_end,
            "--output", folder]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli(args)
    data = {"script": "docs/prototypes/issue20/amr_noise_polar_merge.py", "polar_merge": polar_merge,
            "command": "spherepde " + " ".join(args[:-2]), **json.loads(buf.getvalue())}
    with open(out, "w") as f:
        json.dump(data, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
