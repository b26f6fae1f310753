"""What the commands print: JSON with ``--json``, else short readable summaries."""
from __future__ import annotations

import json

from spherepde.io.summary import jsonable


def _emit(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(jsonable(result), indent=2, allow_nan=False, default=float))
    else:  # the same numbers as the JSON (jsonable: 15 significant digits)
        for k, v in jsonable(result).items():
            print(f"{k:>16}: {json.dumps(v) if isinstance(v, (dict, list)) else v}")



def _resolution_text(out: dict) -> list[str]:
    """The plain-text result of ``validate resolution``: a verdict, then one line per quantity."""
    worst = out["worst"]
    verdict = "resolved" if out["resolved"] else "NOT resolved"
    lines = [f"spherepde validate resolution: {verdict} (largest change "
             f"{100 * out['max_relative_change']:.3g} % "
             + (f"in {worst['quantity']} at t = {_num(worst['t'])}" if worst else "")
             + f"; tolerance {100 * out['tolerance']:g} %, relative to max(|value|, {out['floor']:g}))"]
    for name, c in out["per_quantity"].items():
        lines.append(f"  {name}: {100 * c['change']:.3g} % at t = {_num(c['t'])}")
    if "switch_time" in out:
        tr, tf = out["switch_time"]
        lines.append(f"  switch time: {_num(tr)} against {_num(tf)} (change "
                     f"{100 * out['switch_time_change']:.3g} %)")
    return lines



def _num(v) -> str:
    """A number for reading: 4 significant digits (the JSON output keeps 15)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return str(v) if isinstance(v, int) else f"{v:.4g}"



def _pairs(d: dict, limit: int = 6) -> str:
    """``key value, …`` of the numbers and short strings in ``d`` (at most ``limit``)."""
    items = [f"{k} {_num(v)}" for k, v in d.items()
             if v is not None and isinstance(v, (int, float, str)) and len(str(v)) <= 40]
    return ", ".join(items[:limit]) + (", …" if len(items) > limit else "")



def _run_text(s: dict) -> list[str]:
    """The plain-text result of ``run``: what ran, the key numbers, where the files are."""
    t_end = s.get("config", {}).get("stepping", {}).get("t_end")
    head = (f"spherepde run: {'interrupted' if s.get('interrupted') else 'complete'} in "
            f"{_num(s.get('seconds'))} s: to t = {_num(t_end)}, {s['outputs']} outputs, "
            f"dt {_num(s['dt'])}")
    if "restart" in s:
        head += f" (continued from {s['restart']['from']})"
    lines = [head]
    for rep in ("density", "particles", "transformer"):
        if rep in s:
            r = s[rep]
            info = {k: v for k, v in r.items() if k not in ("final", "seconds", "step_seconds")}
            text = _pairs(info)
            if r.get("final"):
                text += f"; at the end: {_pairs(r['final'])}"
            lines.append(f"  {rep:<12}{text}")
    if "noise" in s:
        lines.append(f"  {'noise':<12}{_pairs(s['noise'], 4)}")
    lines.append(f"  {'output':<12}{s['file']} (summary.json and config.toml beside it)")
    return lines



def _experiment_text(name: str, s: dict, runs: int = 8) -> list[str]:
    """The plain-text result of ``experiment NAME``: a line per run (up to ``runs``) with its
    numbers, the other results, and the files (the whole summary is in summary.json)."""
    lines = [f"spherepde experiment {name}: done in {_num(s.get('seconds'))} s"]
    for r in s["runs"][:runs]:
        lines.append(f"  run         {_pairs(r, 8)}")
    if len(s["runs"]) > runs:
        lines.append(f"  …           {len(s['runs']) - runs} more runs")
    skip = {"experiment", "config", "version", "runs", "seconds", "interrupted", "summary", "plot"}
    for key, value in s.items():
        if key in skip:
            continue
        if isinstance(value, dict) and _pairs(value):
            lines.append(f"  {key}: {_pairs(value)}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            lines.append(f"  {key}: {_num(value)}")
    files = [s[k] for k in ("plot",) if isinstance(s.get(k), str)]
    lines.append(f"  {'output':<12}{s['summary']}" + (f", {', '.join(files)}" if files else ""))
    return lines

