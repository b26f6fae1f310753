"""Issue 20: `examples/metastability.toml` turned by a fixed rotation R, so that none of its special
directions (e_x, e_y, e_z: the eigenvectors of K and V, the clusters ±e_y and the saddles ±e_z of
the clustered state) sits at a pole of the amr mesh's lon-lat raster.

The dynamics commute with rotations (x → Rx with Q, K, V → RQRᵀ, RKRᵀ, RVRᵀ and the initial
direction a → Ra), and every diagnostic of the run (E_β, W₂ to Π#ρ₀ with e the top eigenvector of
VBᵀ, the eigenspace distances) is invariant, so the turned problem has the same exact values: what
changes is only where the mesh's poles fall. R = Rotation.from_euler("xyz", (0.7, 0.4, 1.1)) puts
e_z at latitude 44.8°, e_y at 36.4°, e_x at −22.9°.

    python3 rotated.py OUT.toml      # then: spherepde run OUT.toml --set ... (README.md)
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

ROOT = Path(__file__).resolve().parents[4]
R = Rotation.from_euler("xyz", (0.7, 0.4, 1.1)).as_matrix()


def _toml(v) -> str:
    return "[" + ", ".join(_toml(x) for x in v) + "]" if isinstance(v, (list, np.ndarray)) else repr(float(v))


def main(out: str) -> None:
    text = (ROOT / "examples/metastability.toml").read_text()
    cfg = tomllib.loads(text)
    att, init = cfg["dynamics"]["attention"], cfg["initial"]
    lines = []
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        if key in ("Q", "K", "V") and line.lstrip().startswith(key):
            m = np.array(att[key], float)
            if not np.array_equal(m, np.eye(3)):  # R I Rᵀ = I: kept exact
                line = f"{key} = {_toml(R @ m @ R.T)}"
        elif key == "direction":
            line = f"direction = {_toml(R @ np.array(init['direction']))}"
        lines.append(line)
    Path(out).write_text(f"# examples/metastability.toml turned by R (docs/prototypes/issue20/w2_change/rotated.py)\n"
                         + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
