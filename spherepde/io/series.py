"""Time-series figures of run files: the diagnostics of one run (:func:`plot_diagnostics`) and of
an ensemble of realisations (:func:`plot_ensemble_diagnostics`)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from spherepde.io.maps import _plt, _save
from spherepde.io.rundata import LOG_SPAN, RunData
from spherepde.noise.kernel import synchronisation_rate
from spherepde.validation.fits import log_rate


# ---- diagnostics ------------------------------------------------------------------------------
#: panels of the diagnostics figure: (title, y label, base names, log y)
PANELS = (
    ("mass error", "mass − mass(0)", ("mass",), False),
    ("range of the density", "ρ", ("min_density", "max_density"), True),
    ("interaction energy", r"$e^{-\beta} E_\beta$", ("energy",), "auto"),
    ("distance to the eigenspaces", "dist", ("dist_eigenspace", "dist_eigenspace_V"), False),
    ("W₂ to the projected initial measure (Π#μ₀, each its own)", "W₂ (chordal)", ("w2_projection",), False),
    ("W₂ between particles and density", "W₂ (chordal)", ("w2_particles_density",), False),
)
_SERIES_LABEL = {"mass": "mass", "min_density": "min ρ", "max_density": "max ρ", "energy": "energy",
                 "dist_eigenspace": "to VBᵀ's top eigenspace", "dist_eigenspace_V": "to V's top eigenspace",
                 "w2_projection": "W₂", "w2_particles_density": "W₂"}
#: a line of a diagnostics panel: (series name, label or None, (colour, line style))
_Line = tuple[str, str | None, tuple[str, str]]
_PREFIXES = (("", "density", "-"), ("particles_", "particles", "--"),
             ("transformer_", "transformer", ":"))


#: the energy's log-rate is fitted on the outputs with t ≥ this fraction of the last time (after
#: the first, not yet concentrated phase)
RATE_FIT_FROM = 0.25


def panel_labels(name: str, data: RunData) -> tuple[str, str]:
    """(title, y label) of the diagnostic ``name`` (e.g. ``particles_energy``) from
    :data:`PANELS`, the representation in the title and the energy's β where the file gives it;
    the variable's long_name and name for a diagnostic without a panel."""
    for prefix, what, _ in reversed(_PREFIXES):
        if name.startswith(prefix):
            base = name[len(prefix):]
            break
    for title, ylabel, bases, _ in PANELS:
        if base in bases:
            title = _with_beta(title, data)
            return (title if len(bases) == 1 else f"{title}: {_SERIES_LABEL[base]}") + f" ({what})", ylabel
    return data.long_names.get(name, name), name


def _with_beta(title: str, data: RunData) -> str:
    if title == "interaction energy" and data.energy_beta is not None:
        return f"{title}, β = {data.energy_beta:g}"
    return title


def _energy_rate(ax, data: RunData, t, lines, valid) -> None:
    """On a log-scale energy panel: each line's fitted log-rate (t ≥ RATE_FIT_FROM·t_end) in its
    label, and for a noise-only run the reference slope 2λ₁ through the first line's last point."""
    fit = t >= RATE_FIT_FROM * t[-1]
    if fit.sum() < 3:
        return
    for line, (name, _, _) in zip(ax.get_lines(), lines):
        rate = log_rate(t[fit], data.series[name][valid][fit])[0]
        what = line.get_label() if not line.get_label().startswith("_") else name
        line.set_label(f"{what}: fitted rate {rate:.3g} (t ≥ {t[fit][0]:.3g})")
    theory = synchronisation_rate(data.config)
    if theory is not None:
        y_end = data.series[lines[0][0]][valid][-1]
        ax.plot(t, y_end * np.exp(theory * (t - t[-1])), ":", color="k", lw=1.0,
                label=f"slope 2λ₁ = {theory:.3g} (theory)")


def plot_diagnostics(data: RunData, path, *, dpi: int = 120) -> Path | None:
    """One panel per diagnostic group (:data:`PANELS`: the density solid, particles dashed, the
    transformer dotted): one row up to three panels, 2 × 2 for four, else three columns; None
    when the run has none."""
    plt = _plt()
    valid = data.valid()
    panels: list[tuple[str, str, list[_Line], bool | str]] = []
    for title, ylabel, bases, logy in PANELS:
        lines: list[_Line] = [(p + b, f"{what}: {_SERIES_LABEL[b]}" if len(bases) > 1 else what,
                               (f"C{k}", ls)) for k, b in enumerate(bases)
                              for p, what, ls in _PREFIXES if p + b in data.series]
        lines = [ln for ln in lines if np.isfinite(data.series[ln[0]][valid]).any()]
        if lines:
            panels.append((title, ylabel, lines, logy))
    known = {name for _, _, lines, _ in panels for name, _, _ in lines}
    for name in sorted(set(data.series) - known):  # diagnostics without a panel of their own
        if np.isfinite(data.series[name][valid]).any():
            panels.append((name, name, [(name, None, ("C0", "-"))], False))
    if not panels or valid.size == 0:
        return None
    n = len(panels)
    ncol = n if n <= 3 else 2 if n == 4 else 3
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.1 * ncol, 2.9 * nrow + 0.4), squeeze=False,
                             layout="constrained")
    t = data.times[valid]
    for ax, (title, ylabel, lines, logy) in zip(axes.flat, panels):
        for name, label, (colour, ls) in lines:
            y = data.series[name][valid]
            if name.endswith("mass"):
                y = y - y[0]
            ax.plot(t, y, ls, color=colour, label=label, lw=1.4)
        values = np.concatenate([data.series[n][valid] for n, _, _ in lines])
        positive = bool(np.all(values > 0))  # False for NaN too
        if logy == "auto":
            logy = positive and float(np.max(values) / np.min(values)) > LOG_SPAN
        if logy and positive:
            ax.set_yscale("log")
            if title == "interaction energy":
                _energy_rate(ax, data, t, lines, valid)
        ax.set_title(_with_beta(title, data), fontsize=9)
        ax.set_xlabel("time t")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) > 1:
            ax.legend(fontsize=7)
    for ax in axes.flat[len(panels):]:
        fig.delaxes(ax)
    fig.suptitle(f"{data.label}: diagnostics", fontsize=9)
    return _save(fig, path, dpi)


def plot_ensemble_diagnostics(runs: list, path, *, dpi: int = 120) -> Path | None:
    """The (time,) diagnostics of an ensemble, one panel each (:func:`plot_diagnostics`' layout):
    every realisation a thin line, their mean a thick one with the band mean ± 2 standard errors
    (s/√R, the Monte Carlo uncertainty of the mean, R ≥ 2).  ``runs``: the RunData of each
    realisation on the same output times.  None when they share no diagnostic."""
    plt = _plt()
    valid = runs[0].valid()
    for d in runs[1:]:
        valid = np.intersect1d(valid, d.valid())
    names = [n for n in runs[0].series if all(n in d.series for d in runs)]
    names = [n for n in names if np.isfinite(np.stack([d.series[n][valid] for d in runs])).any()]
    if not names or valid.size == 0:
        return None
    n, R = len(names), len(runs)
    ncol = n if n <= 3 else 2 if n == 4 else 3
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.1 * ncol, 2.9 * nrow + 0.4), squeeze=False,
                             layout="constrained")
    t = runs[0].times[valid]
    for ax, name in zip(axes.flat, names):
        y = np.stack([d.series[name][valid] for d in runs])
        if name.endswith("mass"):
            y = y - y[:, :1]
        for row in y:
            ax.plot(t, row, "-", color="0.6", lw=0.6, alpha=0.6)
        mean = y.mean(axis=0)
        ax.plot(t, mean, "-", color="C0", lw=2.0, label=f"mean of {R}")
        if R > 1:
            se = y.std(axis=0, ddof=1) / math.sqrt(R)
            ax.fill_between(t, mean - 2 * se, mean + 2 * se, color="C0", alpha=0.25,
                            label="mean ± 2 s.e.")
        positive = bool(np.all(y > 0))
        if positive and float(np.max(y) / np.min(y)) > LOG_SPAN:
            ax.set_yscale("log")
        title, ylabel = panel_labels(name, runs[0])
        ax.set_title(title, fontsize=8, wrap=True)
        ax.set_xlabel("time t")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.flat[n:]:
        fig.delaxes(ax)
    fig.suptitle(f"{runs[0].label}: {R} realisations (grey), their mean (blue)", fontsize=9)
    return _save(fig, path, dpi)


__all__ = ["PANELS", "RATE_FIT_FROM", "panel_labels", "plot_diagnostics", "plot_ensemble_diagnostics"]
