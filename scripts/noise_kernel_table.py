"""Write docs/data/noise_kernel_table.json: κ(1), κ′(1), λ₁, λ̄, λ̄′(β = 1) and oddness of the MLP
noise kernel (:class:`spherepde.noise.kernel.NoiseKernel`) for the activations, dimensions and
σ_U = σ_W of docs/noise-kernel-table.md, whose table is rendered from it.

    PYTHONPATH=. python3 scripts/noise_kernel_table.py     # a few seconds
    python3 scripts/docs_numbers.py                        # then re-render the page
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.noise.kernel import NoiseKernel  # noqa: E402

ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh", "gelu")
DIMS = (3, 4, 5, 64)
SIGMAS = (0.0, 0.1)
BETA = 1.0
KEYS = ("kappa", "kappa_prime", "lambda_1", "lambda_bar", "lambda_bar_prime")


def main() -> int:
    rows = []
    for name in ACTIVATIONS:
        for d in DIMS:
            for sig in SIGMAS:
                s = NoiseKernel(name, d, sig, sig).summary(BETA)
                rows.append({"activation": name, "d": d, "sigma": sig, **{k: float(s[k]) for k in KEYS},
                             "odd": "yes" if s["odd"] else "no"})
    out = ROOT / "docs" / "data" / "noise_kernel_table.json"
    out.write_text(json.dumps({"script": "scripts/noise_kernel_table.py", "beta": BETA, "rows": rows},
                              indent=1) + "\n")
    print(f"wrote {out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
