"""The kernels' reports (``e2e micro``): ``micro.md`` with its host-cost section and
``micro.png`` from a micro-benchmark's result (``e2e.kernels.micro``, micro.json), ``step.md``
from the per-step table's (``e2e.kernels.step_bench``, step.json), and the writers of those
files. Pure functions of the result dicts but for the writers.

The standard library alone (matplotlib on first use, for the PNG): ``python -m
e2e.kernels.step_bench`` runs on GPU hosts with torch and Triton but without the report's
stack, and this module does not import torch either (it names the results' entries itself).
"""

from __future__ import annotations

import io
from pathlib import Path

from e2e.paths import atomic_write_bytes, atomic_write_json, atomic_write_text
from e2e.render._table import md_row, md_rule

__all__ = ["FLOOR", "FLOOR_DIRECT", "HOST_ITEMS", "STEP_WAYS", "fmt_number", "micro_markdown",
           "micro_plot", "host_cost_markdown", "steps_markdown", "write_micro", "write_steps"]

# The entries' names in the results (e2e.kernels names the same; tests/test_micro.py holds
# the two equal).
FLOOR = "empty"  # an empty Triton launch through Triton's JIT dispatch: the floor
FLOOR_DIRECT = "empty-direct"  # the same kernel through the paths' direct runner
FLOORS = (FLOOR, FLOOR_DIRECT)
HOST_ITEMS = ("empty", "empty-direct", "meta", "meta-jit", "main")  # e2e.kernels.host_cost.ITEMS
STEP_WAYS = ("main", "pr", "fused", "meta")  # e2e.kernels.step_bench.WAYS
DRY_RUN = "**Dry run** (CPU, `TRITON_INTERPRET=1`): a functional check, not a measurement."


def fmt_number(v: float | None) -> str:
    return "—" if v is None else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def micro_markdown(result: dict) -> str:
    """The result as Markdown: environment, µs-per-call table, op counts, targets."""
    env, spec = result["environment"], result["spec"]
    names = list(spec["paths"]) + [f for f in FLOORS if any(f in s["median_us"] for s in result["shapes"])]
    lines = [
        f"# Packing micro-benchmark ({env.get('gpu') or env['device']})",
        "",
        f"{spec['cols']} columns, {spec['frac_negative'] * 100:g} % of entries −1, same inputs on every path; "
        f"µs per call, median of runs {spec['report_from']}–{spec['runs']}; eager: {spec['calls']} calls "
        f"per run (host clock); graph: {spec['graph_calls']} calls per CUDA graph, replayed "
        f"{max(1, spec['calls'] // spec['graph_calls'])}× per run (CUDA events). `{FLOOR}` is an empty "
        f"Triton kernel launched through Triton's JIT dispatch (the floor); `{FLOOR_DIRECT}` the same kernel "
        "through the cached compiled-kernel runner the paths use.",
        "",
        f"torch {env['torch']}, Triton {env['triton']}, CUDA {env.get('cuda')}, driver {env.get('driver')}, "
        f"Python {env['python']}.",
        "",
    ]
    if spec.get("dry_run"):
        lines += [DRY_RUN, ""]
    header = ["rows"] + [f"{n} eager" for n in names] + [f"{n} graph" for n in names]
    lines += [md_row(header), md_rule(["---:"] * len(header))]
    for shape in result["shapes"]:
        med = shape["median_us"]
        cells = [str(shape["rows"])]
        cells += [fmt_number(med.get(n, {}).get("eager")) for n in names]
        cells += [fmt_number(med.get(n, {}).get("graph")) for n in names]
        lines.append(md_row(cells))
    counted = [s for s in result["shapes"] if s.get("counts")]
    if counted:
        lines += ["", "Per call, from `torch.profiler` (kernels / device copies / memsets / allocations);"
                  " identical at every shape unless a range is shown:", "",
                  md_row(["path", "kernels", "copies", "memsets", "allocations"]),
                  md_rule(["---"] + ["---:"] * 4)]
        for n in names:
            cols = []
            for key in ("kernels", "copies", "memsets", "allocations"):
                vals = sorted({s["counts"][n][key] for s in counted if n in s["counts"]})
                cols.append("—" if not vals else (f"{vals[0]:g}" if len(vals) == 1 else f"{vals[0]:g}–{vals[-1]:g}"))
            lines.append(md_row([n, *cols]))
    bad = [f"{s['rows']} rows: {', '.join(p for p, ok in s['correct'].items() if not ok)}"
           for s in result["shapes"] if not all(s["correct"].values())]
    lines += ["", "Every path matched the torch reference at every shape." if not bad
              else "**Wrong results**: " + "; ".join(bad)]
    if result.get("targets"):
        lines += ["", md_row(["target", "worst ratio", "at rows", "bound", "met"]),
                  md_rule(["---", "---:", "---:", "---:", "---"])]
        for t in result["targets"]:
            lines.append(md_row([t["target"], f"{t['worst_ratio']:.2f}", str(t["worst_rows"]),
                                 f"{t['bound']:g}", "yes" if t["met"] else "**no**"]))
    if result.get("host"):
        lines += ["", host_cost_markdown(result["host"]).rstrip("\n")]
    for warning in result.get("warnings", []):
        lines += ["", f"> warning: {warning}"]
    return "\n".join(lines) + "\n"


def micro_plot(result: dict) -> bytes | None:
    """PNG bytes: µs per call against rows, eager and graph side by side; None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None

    names = list(result["spec"]["paths"]) + list(FLOORS)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, mode in zip(axes, ("eager", "graph")):
        for n in names:
            pts = [(s["rows"], s["median_us"].get(n, {}).get(mode)) for s in result["shapes"]]
            pts = [(r, v) for r, v in pts if v is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", linestyle="--" if n in FLOORS else "-", label=n)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"rows (× {result['spec']['cols']} columns)")
        ax.set_ylabel("µs per call")
        ax.set_title(f"{mode} ({result['environment'].get('gpu') or result['environment']['device']})")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def host_cost_markdown(host: dict) -> str:
    """The host-cost table, the breakdown of one ``meta`` call, and the target
    (``e2e.kernels.host_cost``)."""
    lines = ["## Host cost of one eager build (the one launch)", "",
             f"µs per call on the host, median of {host['runs']} interleaved runs of "
             f"{host['calls']} calls, all in one process. `empty`: an empty Triton kernel "
             "through Triton's JIT dispatch; `empty-direct`: through a cached runner; `meta`: "
             "`swa_decode_meta` as the builder calls it; `meta-jit`: the same through the JIT "
             "on every call; `main`: vLLM 0.32's decode build (— where vLLM's ops were not "
             "given).", "",
             md_row(["shape", *HOST_ITEMS, "meta / empty", "meta / main"]),
             md_rule(["---"] + ["---:"] * (len(HOST_ITEMS) + 2))]
    for s in host["shapes"]:
        m = s["median_us"]
        main = m.get("main")
        lines.append(md_row([s["name"], *(fmt_number(m.get(i)) for i in HOST_ITEMS),
                             f"{s['meta_over_empty']:.2f}",
                             f"{m['meta'] / main:.2f}" if main else "—"]))
    lines += ["", "Where one `meta` call's host time goes (µs; differences of the parts, each "
              "timed alone):", "",
              md_row(["shape", "wrapper Python", "key and pointers", "driver launch (runner)",
                      "what int pointers save", "Triton's binding and specialisation"]),
              md_rule(["---"] + ["---:"] * 5)]
    for s in host["shapes"]:
        m = s["median_us"]
        runner, tensors = m.get("runner (int pointers)"), m.get("runner (tensors)")
        key = None if runner is None else m["launch"] - runner
        saved = None if runner is None or tensors is None else tensors - runner
        binding = None if tensors is None else m["jit dispatch"] - tensors
        lines.append(md_row([s["name"], fmt_number(m["wrapper"]), fmt_number(key),
                             fmt_number(runner), fmt_number(saved), fmt_number(binding)]))
    t = host["target"]
    lines += ["", f"Target: {t['what']}: worst {t['worst_ratio']:.2f} ({t['worst_shape']}), "
              f"{'met' if t['met'] else '**not met**'}."]
    return "\n".join(lines) + "\n"


def steps_markdown(result: dict) -> str:
    """Markdown: µs per build (eager, graph), µs per V4.1 / V4 step in a graph, op counts;
    headed by a dry-run note when the result's environment says it was one."""
    ways = STEP_WAYS
    k41, k4 = result["step_builds"]["V4.1"], result["step_builds"]["V4"]
    lines = ["## The whole decode SWA metadata build (window + packing)", "",
             "µs per build; per step = per build × builds per step "
             f"(V4.1: {k41}, V4: {k4}); `meta` beyond 32 rows is `pr`'s sequence.", "",
             md_row(["shape", *(f"{w} eager" for w in ways), *(f"{w} graph" for w in ways),
                     "meta/main graph", *(f"{w} V4.1 step (graph)" for w in ways)]),
             md_rule(["---"] * (2 + 3 * len(ways)))]
    for s in result["shapes"]:
        m = s["median_us"]
        ratio = (m["meta"]["graph"] / m["main"]["graph"]
                 if m["meta"]["graph"] and m["main"]["graph"] else None)
        lines.append(md_row([s["name"], *(fmt_number(m[w]["eager"]) for w in ways),
                             *(fmt_number(m[w]["graph"]) for w in ways), fmt_number(ratio),
                             *(fmt_number(m[w]["graph"] and m[w]["graph"] * k41) for w in ways)]))
    lines += ["", "Per build, from `torch.profiler` (kernels / copies / memsets / allocations):",
              "", md_row(["shape", *ways]), md_rule(["---"] * (1 + len(ways)))]
    for s in result["shapes"]:
        c = s["counts"]
        lines.append(md_row([s["name"], *(
            (f"{c[w]['kernels']:g} / {c[w]['copies']:g} / {c[w]['memsets']:g} / "
             f"{c[w]['allocations']:g}") if w in c else "—" for w in ways)]))
    bad = [s["name"] for s in result["shapes"] if not all(s["correct"].values())]
    lines += ["", "Every way matched main at every shape." if not bad
              else f"**Wrong results** at: {', '.join(bad)}"]
    t = result["target"]
    lines += ["", f"Target: {t['what']}: worst {t['worst_ratio']} ({t['worst_shape']}), "
              f"bound {t['bound']}: {'met' if t['met'] else 'NOT met'}."]
    text = "\n".join(lines) + "\n"
    return f"{DRY_RUN}\n\n{text}" if result.get("environment", {}).get("dry_run") else text


def write_micro(result: dict, out: Path) -> list[Path]:
    """Write ``micro.json``, ``micro.md`` and (with matplotlib) ``micro.png`` atomically."""
    out = Path(out)
    written = [out / "micro.json", out / "micro.md"]
    atomic_write_json(written[0], result)
    atomic_write_text(written[1], micro_markdown(result))
    png = micro_plot(result)
    if png is not None:
        written.append(out / "micro.png")
        atomic_write_bytes(written[2], png)
    return written


def write_steps(result: dict, out: Path) -> tuple[str, list[Path]]:
    """Write ``step.json`` and ``step.md`` atomically; return step.md's text and both paths."""
    text = steps_markdown(result)
    written = [Path(out) / "step.json", Path(out) / "step.md"]
    atomic_write_json(written[0], result)
    atomic_write_text(written[1], text)
    return text, written
