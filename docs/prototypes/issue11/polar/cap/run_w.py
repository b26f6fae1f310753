"""Williamson 1 with the polar cap: python run_w.py NLATS ALPHA K B [REPEATS]
prints l2, min, mass error, seconds, and the time split cap / outer per step."""
import sys, time, json
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from spherepde.solvers.registry import register_stepper
from spherepde.validation import transport_runs as tr
import cap as capmod

K, B = int(sys.argv[3]), int(sys.argv[4])
made = []
@register_stepper("ffsl-cap")
def _mk(grid, velocity, **opt):
    s = capmod.CapFFSL(grid, velocity, K=K, B=B, **opt); made.append(s); return s

alpha = float(sys.argv[2])
res = []
for n in [int(x) for x in sys.argv[1].split(",")]:
    for name in ("ffsl-cap",):
        t = time.time()
        r = tr.run_transport(tr.TransportConfig(case="williamson1", field="cosine-bell", nlat=n, alpha=alpha, stepper=name), progress=False)
        s = made[-1]
        line = dict(stepper=name, nlat=n, K=K, B=B, l2=r["l2"], linf=r["linf"], min=r["min_value"], mass=r["mass_error"],
                    seconds=r["seconds"], steps=r["steps"], cap_s=s.cap_time, outer_s=s.outer_time, cap_substeps=s.cap_substeps, fix_count=s.fix_count, fix_mass=s.fix_mass, ring_fix=s.ring_fix, handover=capmod.HANDOVER, trace=capmod.TRACE, vel_s=sum(c.vel_time for c in s.caps))
        print(json.dumps(line), flush=True); res.append(line)
if len(res) == 2:
    print("order", np.log(res[0]["l2"] / res[1]["l2"]) / np.log(res[1]["nlat"] / res[0]["nlat"]))
