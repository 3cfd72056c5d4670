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

``--records FILE`` also writes each estimate's record as its search is done (the roots, the
runs near the edge, the fit, the estimate's own interval and method), which
``bench/capacity_df_rules.py`` reads to compare df rules over the same searches; ``--skip N``
starts at search N (two processes over one file); ``--boot B`` adds a parametric bootstrap of
|r| at the fitted capacity (B refits an estimate: slow).

Reads the internals of e2e's estimate, ``e2e/analysis/capacity/estimate.py`` (``_Profile``, ``_near``,
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

E = load(str(Path(__file__).resolve().parents[1] / "e2e/analysis/capacity/estimate.py"))


def one(search):
    out = {}
    for arm, got in search["arms"].items():
        if got is None: continue
        runs = [E.MarginRun(r, m, c) for r, m, c in got["runs"]]
        est = E.capacity_estimate(runs, lo=got["lo"], hi=got["hi"])
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
        near = np.abs(s * (xh - x)) < 2 * sig + E.BAND
        out[arm] = {"open": False, "rT": sg(lt), "sL": sg(x.min()), "sR": sg(x.max()),
                    "inside": x.min() <= lt <= x.max(), "n": len(x), "op": op,
                    "unc": int((~(A | B)).sum()), "closed": est.closed, "ra": ra,
                    "low": est.low, "high": est.high, "rate": est.rate, "method": est.method,
                    "truth": search["truth"][arm], "slope": s, "sigma": sig,
                    "k": len(set(x.tolist())), "kop": len(set(x[near].tolist())),
                    "reps": int(max(np.unique(x, return_counts=True)[1]))}
        if BOOT and search["search"] < BOOT_SIMS:
            out[arm]["boot"] = boot(x, xh, ls, lsig, BOOT, search["search"])
    return out


BOOT, BOOT_SIMS = 0, 0


def boot(x, xh, ls, lsig, n_boot, seed):
    """|signed root| at the fitted capacity over ``n_boot`` runs simulated at the search's own
    rates from the fitted line (censored at the band as the estimate reads them), refitted;
    replicates with no edge among their runs (the estimate would not place one) left out."""
    from scipy import optimize
    rng = np.random.default_rng([seed, 0xB007])
    s, sig = math.exp(ls), math.exp(lsig)
    mu = s * (xh - x)
    box3 = [E._SLOPE, E._SIGMA, (float(x.min()), float(x.max()))]
    got = []
    for _ in range(n_boot):
        m = mu + sig * rng.standard_normal(len(x))
        if (m >= 0).all() or (m < 0).all():
            continue
        A, B = m >= E.BAND, m <= -E.BAND
        m = np.clip(m, -E.BAND, E.BAND)
        def full(p):
            ll, g = E._loglik(p[2], p[0], p[1], x, m, A, B); return -ll, -g
        def prof(p):
            ll, g = E._loglik(xh, p[0], p[1], x, m, A, B); return -ll, -g[:2]
        f = min((optimize.minimize(full, np.array([ls, lsig, x0]), jac=True, method="L-BFGS-B",
                                   bounds=box3) for x0 in (xh, float(x.min()), float(x.max()))),
                key=lambda r: r.fun)
        g = optimize.minimize(prof, np.array([ls, lsig]), jac=True, method="L-BFGS-B",
                              bounds=box3[:2])
        got.append(math.sqrt(max(2 * (g.fun - f.fun), 0.0)))
    return got


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
    p.add_argument("--skip", type=int, default=0, help="leave out the first N searches of each")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--records", metavar="FILE", help="also write every estimate's record (JSON lines)")
    p.add_argument("--boot", type=int, default=0, help="parametric bootstrap replicates of |r| at the fit")
    p.add_argument("--boot-sims", type=int, default=10**9, help="bootstrap only the first N searches")
    args = p.parse_args()
    BOOT, BOOT_SIMS = args.boot, args.boot_sims
    for src in args.runs:
        S = [json.loads(l) for l in open(src) if l.strip()]
        S = S[:args.sims] if args.sims else S
        S = S[args.skip:]
        t0 = time.time()
        out = open(args.records if len(args.runs) == 1 else f"{args.records}.{Path(src).stem}",
                   "w") if args.records else None
        res = []
        with Pool(args.jobs) as pool:  # records written as each search is done
            for i, d in enumerate(pool.imap(one, S, chunksize=1)):
                res.append(d)
                if out:
                    out.writelines(json.dumps(dict(v, arm=a, search=args.skip + i), default=lambda o: o.item())
                                   + "\n" for a, v in d.items())
                    out.flush()
        recs = [dict(v, arm=a, search=args.skip + i) for i, d in enumerate(res) for a, v in d.items()]
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
