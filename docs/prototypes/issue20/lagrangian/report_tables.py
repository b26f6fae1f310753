"""Markdown tables for the report from tables.json, bench_coarse.json, field_l1.json (if present)."""
import json
import os

T = json.load(open("tables.json"))
out = []
for beta, ns, ts in ((100.0, [48, 96, 192], [6, 8, 10, 12, 16, 20, 24]), (1000.0, [96, 128, 192], [6, 8, 10, 12, 16, 20, 24])):
    for q in ("energy", "w2", "dist_eigenspace"):
        out.append(f"\nβ={beta:g} {q}: t | ref ± se | " + " | ".join(f"LQ n{n} (rel %)" for n in ns))
        for r in T["rows"]:
            if r["beta"] == beta and r["quantity"] == q and r["t"] in ts:
                cells = [f"{r['lq'][str(n)]['value']:.4f} ({100 * r['lq'][str(n)]['rel']:+.1f})"
                         if str(n) in r["lq"] else "-" for n in ns]
                out.append(f"{r['t']} | {r['ref']:.4f} ± {r['ref_stderr']:.4f} | " + " | ".join(cells))
out.append("\nswitch time (first dist_eigenspace_V < dist_eigenspace after the minimum of dist_eigenspace):")
for s in T["switch"]:
    if s["beta"] == 100.0:
        lab = (f"{s['kind']} N={s.get('N')}" + (f" ({s['seeds']} seeds, {s['switched']} switched)" if "seeds" in s else f" seed {s.get('seed')}")) \
            if "particles" in s["kind"] else f"{s['kind']} nlat {s['nlat']} ({s['points']} pts, dt {s['dt']})"
        st = s["switch_time"]
        err = f" ± {s['switch_time_stderr']:.2f}" if s.get("switch_time_stderr") else ""
        out.append(f"  {lab}: {st:.2f}{err}   w2_min {s['w2_min']:.3f}")
if os.path.exists("bench_coarse.json"):
    out.append("\none velocity evaluation, 1 thread (loaded machine): all N sources vs coarsened (δ = ¼ width)")
    for b in json.load(open("bench_coarse.json")):
        c = b["d0.25"]
        out.append(f"  β={b['beta']:g} N={b['N']} t={b['t']:g}: {b['allpairs_s']:.3f} s ({b['method']}) vs {c['s']:.3f} s, "
                   f"M={c['M']}, max|Δv|/max|v| = {c['max_dv_rel']:.1e} (δ=⅛: {b['d0.125']['max_dv_rel']:.1e}, M={b['d0.125']['M']})")
open("report_tables.md", "w").write("\n".join(out) + "\n")
print("\n".join(out))

if os.path.exists("field_l1.json"):
    import math
    F = json.load(open("field_l1.json"))
    out = ["\nfield L1 on the ffsl-ppm nlat-64 grid (LQ field: conservative sub-cell top-hat deposit, kfac 8):"]
    for r in F["rows"]:
        ns = [k for k in r if k.startswith("n")]
        if "L1_vs_ffsl" in r[ns[0]]:
            e = [r[n]["L1_vs_ffsl"] for n in ns]
            p = math.log(e[0] / e[-1]) / math.log(int(ns[-1][1:]) / int(ns[0][1:]))
            out.append(f"  t={r['t']:g} vs ffsl-ppm nlat 64: " + ", ".join(f"{n} {v:.4f}" for n, v in zip(ns, e))
                       + f"  (order {ns[0]}→{ns[-1]}: {p:.2f}); peak ρ ffsl {r['ffsl_max']:.3f}, LQ n96 {r['n96']['max']:.3f}")
        else:
            out.append(f"  t={r['t']:g} vs LQ n96 (self): " + ", ".join(f"{n} {r[n]['L1_vs_lq96']:.4f}" for n in ns if "L1_vs_lq96" in r[n]))
    out.append("  mass of every LQ field: |Σρ·area − 1| ≤ %.1e; min ρ ≥ 0 (%s)" % (
        max(abs(r[n]["mass"] - 1) for r in F["rows"] for n in r if n.startswith("n")),
        "all ≥ 0" if min(r[n]["min"] for r in F["rows"] for n in r if n.startswith("n")) >= 0 else "NEGATIVE"))
    open("report_tables.md", "a").write("\n".join(out) + "\n")
    print("\n".join(out))
