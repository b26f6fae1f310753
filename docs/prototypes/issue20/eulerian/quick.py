import sys, time, numpy as np
from amr import AMRSphere
from common import attention, rho0_cell_mass, diagnostics
beta=float(sys.argv[1]); nlat0=int(sys.argv[2]); lmax=int(sys.argv[3]); msplit=float(sys.argv[4]); tend=float(sys.argv[5])
g=AMRSphere(nlat0,lmax,msplit,attention(beta))
m=g.init_mass(rho0_cell_mass)
print('cells',g.n,'levels',np.bincount(g.level),'mass-1',m.sum()-1, 'area-4pi', g.area.sum()-4*np.pi)
t0=time.time()
def cb(t,g,m):
    d=diagnostics(g.xc,m,beta)
    print(f"t={t:5.2f} n={g.n:6d} lev={np.bincount(g.level)} steps={g.steps} mass-1={m.sum()-1:.2e} min={m.min():.2e} E={d['energy']:.5f} W2={d['w2_projection']:.4f} dE={d['dist_eigenspace']:.4f} dV={d['dist_eigenspace_V']:.4f} wall={time.time()-t0:.1f}",flush=True)
g.run(m,np.arange(0,tend+1e-9,1.0),cb)
