import sys, time, math, numpy as np
from spherepde.solvers.eulerian.transport import FFSLSphere
from spherepde.experiments import transport as tr

mode = sys.argv[1]
def advance_lr(self, rho, az, am, dt):
    plan = self._zonal_plan(az, dt)
    one = np.ones_like(rho)
    Z1 = self._zonal(one, plan); M1 = self._meridional(one, am, dt)
    Zr = self._zonal(rho, plan); Mr = self._meridional(rho, am, dt)
    gx = Zr - rho * Z1  # flux-form increment minus rho × increment of 1 (Lin–Rood advective form)
    gy = Mr - rho * M1
    a = rho + 0.5 * gy; b = rho + 0.5 * gx
    return rho + (self._zonal(a, plan) - a) + (self._meridional(b, am, dt) - b)
def advance_sym(self, rho, az, am, dt):
    plan = self._zonal_plan(az, 0.5*dt)
    r1 = self._zonal(self._meridional(self._zonal(rho, plan), am, dt), plan)
    r2 = self._meridional(self._zonal(self._zonal(self._meridional(rho, am, 0.5*dt), plan),plan), am, 0.5*dt)
    return 0.5*(r1+r2)
def advance_mzm(self, rho, az, am, dt):
    plan = self._zonal_plan(az, dt)
    return self._meridional(self._zonal(self._meridional(rho, am, 0.5*dt), plan), am, 0.5*dt)
if mode == "mzm": FFSLSphere.advance = advance_mzm
if mode == "lr": FFSLSphere.advance = advance_lr
if mode == "sym": FFSLSphere.advance = advance_sym
for alpha in [float(a) for a in sys.argv[3].split(',')]:
  for n in [int(x) for x in sys.argv[2].split(',')]:
    t=time.time()
    r = tr.run_transport(tr.TransportConfig(case="williamson1", field="cosine-bell", nlat=n, alpha=alpha), progress=False)
    print(mode, alpha, n, "l2 %.4g linf %.4g min %.3g mass %.2g  %.1fs" % (r["l2"], r["linf"], r["min_value"], r["mass_error"], time.time()-t), flush=True)
