"""Why closed capacity intervals miss: per estimate of searches that
``bench/capacity_search_simulation.py --save-runs FILE`` saved, the signed root of the profile
deviance at the truth (``rT``) and at the measured ends, the df e2e's estimate reads, and the
sandwich variance of ln C over the variance the model states, with the scores of runs up to
L apart in the order they ran correlated (``hacL``, Bartlett weights) or summed in consecutive
blocks of k (``clk``). Then, per arm, how often an interval would close and cover the truth
under other quantile rules or scaled by such a sandwich (the interval is the rates where
|signed root| / scale is within the quantile). A sandwich ratio near 1 says the correlation
of neighbouring runs is not what widens the truth's root; a heavy-tailed |rT| at every rho
says the quantile is.

    python bench/capacity_search_simulation.py --sims 400 --repeats 6 --save-runs r6.jsonl
    python bench/capacity_root_diagnostics.py r6.jsonl --sims 100

Reads the internals of e2e's estimate, ``e2e/analysis/_capacity.py`` (``_Profile``, ``_near``,
``_loglik``): a diagnostic of the estimate, not a user of it.
"""
import json, math, os, sys, time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from scipy import special
from scipy.stats import t as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capacity_replay import load  # noqa: E402

E = load(str(Path(__file__).resolve().parents[1] / "e2e/analysis/_capacity.py"))


def one(search):
    out = {}
    for arm, got in search["arms"].items():
        if got is None: continue
        runs = [E.MarginRun(r, m, c) for r, m, c in got["runs"]]
        est = E.estimate(runs, lo=got["lo"], hi=got["hi"])
        if not (0 < est.rate < math.inf):
            out[arm] = {"open": True}; continue
        prof = E._Profile([E._near(r) for r in runs])
        xh = math.log(est.rate); top = prof(xh); x = prof.x
        sg = lambda v: math.copysign(math.sqrt(max(2 * (top - prof(v)), 0)), xh - v)
        lt = math.log(search["truth"][arm]); ls, lsig = prof.params(xh)
        s, sig = math.exp(ls), math.exp(lsig)
        op = int(np.sum(np.abs(s * (xh - x)) < 2 * sig + E.BAND))
        mu = s * (xh - x); z = (prof.m - mu) / sig; lp = -0.5 * z * z - 0.5 * math.log(2 * math.pi)
        ha, hb = np.exp(lp - special.log_ndtr(-z)), np.exp(lp - special.log_ndtr(z))
        A, B = prof.above, prof.below
        dm = np.where(A, ha, np.where(B, -hb, z)) / sig
        ds = np.where(A, ha * z, np.where(B, -hb * z, z * z - 1)) / sig
        Gs = np.stack([dm * s, dm * mu, ds * sig], 1)
        def gr(t):
            g = E._loglik(t[0], t[1], t[2], x, prof.m, A, B)[1]; return np.array([g[2], g[0], g[1]])
        th = np.array([xh, ls, lsig]); h = 1e-5
        H = np.column_stack([(gr(th + e) - gr(th - e)) / (2 * h) for e in np.eye(3) * h])
        ra = {}
        try:
            Vm = np.linalg.inv(-0.5 * (H + H.T))
            if Vm[0, 0] > 0:
                for L in (0, 1, 2, 3):
                    M = Gs.T @ Gs
                    for l in range(1, L + 1):
                        C = Gs[l:].T @ Gs[:-l]; M = M + (1 - l / (L + 1)) * (C + C.T)
                    ra[f"hac{L}"] = float((Vm @ M @ Vm)[0, 0] / Vm[0, 0])
                for k in (2, 4):
                    S = np.array([Gs[i:i + k].sum(0) for i in range(0, len(x), k)])
                    ra[f"cl{k}"] = float((Vm @ S.T @ S @ Vm)[0, 0] / Vm[0, 0])
        except np.linalg.LinAlgError:
            pass
        out[arm] = {"open": False, "rT": sg(lt), "sL": sg(x.min()), "sR": sg(x.max()),
                    "inside": x.min() <= lt <= x.max(), "n": len(x), "op": op,
                    "unc": int((~(A | B)).sum()), "closed": est.closed, "ra": ra}
    return out
def q(df): return T.ppf(0.975, max(df, 1))
def ev(recs, rule):
    cl, cv = [], []
    for r in recs:
        if r["open"]: cl.append(False); continue
        c, k = rule(r); ok = r["sL"] / k >= c and -r["sR"] / k >= c; cl.append(ok)
        if ok: cv.append(abs(r["rT"]) / k <= c and r["inside"])
    p = np.mean(cv) if cv else float("nan")
    return f"closed {np.mean(cl)*100:5.1f} cover {p*100:5.1f}±{math.sqrt(p*(1-p)/max(len(cv),1))*100:.1f} ({len(cv)})"
R = {"old": lambda r: (q(r["op"] - 2), 1.), "z": lambda r: (1.96, 1.), "n-3": lambda r: (q(r["n"] - 3), 1.),
     "unc-2": lambda r: (q(r["unc"] - 2), 1.), "op/2-2": lambda r: (q(r["op"] / 2 - 2), 1.),
     "op/2": lambda r: (q(r["op"] / 2), 1.)}
for L in ("hac0", "hac1", "hac2", "hac3", "cl2", "cl4"):
    R["old+" + L] = (lambda L: lambda r: (q(r["op"] - 2), math.sqrt(max(1., r["ra"].get(L, 1.)))))(L)
    R["z+" + L] = (lambda L: lambda r: (1.96, math.sqrt(max(1., r["ra"].get(L, 1.)))))(L)
if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="files --save-runs wrote")
    p.add_argument("--sims", type=int, default=0, help="only the first N searches of each (0: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    args = p.parse_args()
    for src in args.runs:
        S = [json.loads(l) for l in open(src) if l.strip()]
        S = S[:args.sims] if args.sims else S
        t0 = time.time()
        with Pool(args.jobs) as pool: res = pool.map(one, S, chunksize=1)
        recs = [dict(v, arm=a) for d in res for a, v in d.items()]
        rt = np.abs([r["rT"] for r in recs if not r["open"] and r["inside"]])
        print(src, len(S), f"{time.time()-t0:.0f} s; |rT| q90/95/97.5", np.round(np.quantile(rt, [.9, .95, .975]), 2),
              "med op", np.median([r["op"] for r in recs if not r["open"]]), "n", np.median([r["n"] for r in recs if not r["open"]]),
              "unc", np.median([r["unc"] for r in recs if not r["open"]]))
        for L in ("hac0", "hac1", "hac2", "cl2"):
            v = [r["ra"][L] for r in recs if not r["open"] and L in r["ra"]]
            print(f"  {L} median {np.median(v):.2f} mean {np.mean(v):.2f}")
        arms = sorted({r["arm"] for r in recs})
        for name, rule in R.items():
            print(f"  {name:10s} " + " | ".join(f"{a}: " + ev([r for r in recs if r["arm"] == a], rule) for a in arms))
        sys.stdout.flush()
