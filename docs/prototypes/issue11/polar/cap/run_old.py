"""The earlier prototype (/work/shared/prototypes/polar_cap_remap.py) at NLATS ALPHA K B."""
import sys, time, json
sys.path.insert(0, "/work/shared/prototypes")
from spherepde.solvers.registry import register_stepper
from spherepde.validation import transport_runs as tr
import polar_cap_remap as old
K, B = int(sys.argv[3]), int(sys.argv[4])
@register_stepper("ffsl-oldcap")
def _mk(grid, velocity, **opt):
    return old.CapClipFFSL(grid, velocity, K=K, B=B, **opt)
for n in [int(x) for x in sys.argv[1].split(",")]:
    for name in sys.argv[5].split(",") if len(sys.argv) > 5 else ("ffsl-oldcap",):
        r = tr.run_transport(tr.TransportConfig(case="williamson1", field="cosine-bell", nlat=n, alpha=float(sys.argv[2]), stepper=name), progress=False)
        print(json.dumps(dict(stepper=name, nlat=n, l2=r["l2"], min=r["min_value"], mass=r["mass_error"], seconds=r["seconds"], steps=r["steps"])), flush=True)
