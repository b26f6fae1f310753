"""Coefficients of the cody-waite exponential's polynomial (spherepde/dynamics/attention/expsum.py):
the degree-11 polynomial that interpolates e^r at the 12 Chebyshev nodes of [−a, a],
a = 0.3471 (ln2/2 = 0.34657 plus room for the rounding of the reduced argument), computed with
40-digit arithmetic (mpmath), rounded to float64, and its largest relative error against e^r on
4001 points of [−a, a] (with the float64 coefficients, exact arithmetic otherwise).

    python docs/prototypes/issue23/exp_coefficients.py   # writes exp_coefficients.json here
"""
import json
from pathlib import Path

import mpmath as mp

mp.mp.dps = 40
A = mp.mpf("0.3471")
out = {"interval_half_width": float(A), "degrees": {}}
for deg in (10, 11, 12, 13):
    n = deg + 1
    nodes = [A * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    c = mp.lu_solve(mp.matrix([[x**j for j in range(n)] for x in nodes]),
                    mp.matrix([mp.e**x for x in nodes]))
    cd = [float(c[j]) for j in range(n)]
    xs = [A * (2 * mp.mpf(i) / 4000 - 1) for i in range(4001)]
    err = max(abs((sum(mp.mpf(cd[j]) * x**j for j in range(n)) - mp.e**x) / mp.e**x) for x in xs)
    taylor = max(abs((sum(x**j / mp.factorial(j) for j in range(n)) - mp.e**x) / mp.e**x)
                 for x in (-A, A))
    out["degrees"][str(deg)] = {"coefficients": cd, "max_rel_error": float(err),
                                "taylor_max_rel_error": float(taylor)}
    print(deg, float(err), float(taylor))
Path(__file__).with_suffix(".json").write_text(json.dumps(out, indent=1))
