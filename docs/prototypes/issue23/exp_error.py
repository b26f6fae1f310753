"""Error model numbers of the compiled attention sums' two exponential paths (issue 23), against
long double (x86 80-bit), written to exp_error.json beside this file:

* ``exp``: largest relative error of each exponential over the arguments the sums give it
  (cody-waite: 400 001 points of [−708, 0] plus 2001 log-spaced ones; legacy: [−64, 0], through
  the sums with logits (0, t)), and np.exp's over the same points for comparison;
* ``means``: for each class of B and β ∈ {1, 100, 10⁴}, the largest |m − m_ld| of the softmax
  mean (660 targets, 600 unit sources of a concentrated cloud, seeded) and its largest ratio to
  the error model of tests/dynamics/test_attention_kernels.py (``model_bound``).

    python docs/prototypes/issue23/exp_error.py
"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "dynamics"))

from spherepde.dynamics.attention import compiled as C  # noqa: E402
from spherepde.dynamics.attention import expsum  # noqa: E402
from test_attention_kernels import concentrated, matrix, model_bound, reference_ld  # noqa: E402
from conftest import unit  # noqa: E402

out = {"exp": {}, "means": []}
t = np.r_[np.linspace(-708.0, 0.0, 400001), -np.logspace(-300, 2.8, 2001)]
t = t[t >= -708.0]
truth = np.exp(t.astype(np.longdouble))
rel = lambda e: float(np.max(np.abs((e - truth) / truth)))  # noqa: E731
out["exp"]["cody-waite"] = {"range": [-708.0, 0.0], "max_rel": rel(expsum.exp(t)),
                            "np_exp_max_rel": rel(np.exp(t))}
t64 = np.linspace(-64.0, 0.0, 20001)
num = C.sums(t64[:, None], np.array([[0.0], [1.0]]), np.zeros(2), 1.0, path="legacy")[0][:, 0]
tr = np.exp(t64.astype(np.longdouble))
out["exp"]["legacy"] = {"range": [-64.0, 0.0], "max_rel": float(np.max(np.abs((num - tr) / tr))),
                        "below": "clamped at -64 (e^-64 for any t < -64)"}
for bname in ("identity", "diagonal", "spd-random", "general-random"):
    rng = np.random.default_rng(len(bname))
    y = concentrated(600, rng)
    logw = np.log(rng.uniform(0.5, 1.5, y.shape[0]) / y.shape[0])
    x = np.vstack([y[::10], unit(rng.normal(size=(60, 3)))])
    B = matrix(bname, rng)
    for beta in (1.0, 100.0, 1e4):
        z = x @ B
        ref, M = reference_ld(z, y, logw, beta)
        row = {"B": bname, "beta": beta}
        for path in C.PATHS:
            m, _ = C.mean(z, y, logw, beta, "softmax", path=path)
            err = np.linalg.norm((m - ref).astype(float), axis=1)
            bound = model_bound(z, y, logw, beta, M.astype(float), path)
            row[path] = {"max_err": float(err.max()), "max_err_over_bound": float(np.max(err / bound))}
        out["means"].append(row)
        print(row)
print(out["exp"])
Path(__file__).with_suffix(".json").write_text(json.dumps(out, indent=1))
