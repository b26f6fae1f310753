import sys, numpy as np
exec(open('onestep.py').read().split("T = case.period")[0])
np.set_printoptions(precision=0, linewidth=200, suppress=True)
T = case.period; t0 = T/4 - 0.3
lim = sys.argv[2]; C = float(sys.argv[3])
st = make_stepper("ffsl-ppm", g, case.velocity, courant=0.8, limiter=lim)
r = exact(t0); dt = C * g.dlon / np.linalg.norm(w); ns = int(round(0.6/dt)); dt = 0.6/ns; t = t0
for k in range(ns): r = st.step(r, t, dt); t += dt
e = r - exact(t)
j, i = np.unravel_index(np.argmax(abs(e)), e.shape)
print("argmax", j, i, "err", e[j, i], "rho", r[j, i])
print("rows 0-5 around col", i); print(e[:6, i-6:i+7])
print("exact", exact(t)[:6, i-6:i+7])
