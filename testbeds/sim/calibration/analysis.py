"""Calibration analysis of the LatencyLab real data (TSC differentials + hardware clock).

Run: /opt/latency-test-venv/bin/python testbeds/sim/calibration/analysis.py
Writes out/results.json (beside this file) and prints every table used in report.md.

Data (see report.md, "Files used"):
- full runs in orchestrator/tests/fixtures/latencylab/data/ (FWD_s1 run04, NF_s1 run01, silicon FWD_s1 run04);
- 16,000-character chunks of further runs of the public repository OCT-FPGA/LatencyLab, transcribed to
  data/<TAG>_s<n>_run<NN>.txt (pkt_id diff), each file's header names path, commit, offset.

Conventions: percentiles are numpy's default (linear, R type 7). Ids ≡ 78 (mod 100) are dropped
everywhere (misparsed ids), id 1 (first probe after the idle gap) too.
"""
import json, os
import numpy as np, pandas as pd
from common import clean
from load import load_all, FIX

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out')
os.makedirs(OUT, exist_ok=True)
RNG = np.random.default_rng(20261201)
RES = {}

def rsd(x):
    x = np.asarray(x, float); return 1.4826 * np.median(np.abs(x - np.median(x)))

def pct(x, ps=(1, 5, 25, 50, 75, 95, 99)):
    return [float(np.percentile(x, p)) for p in ps]

A = load_all()
# windows shared by the chunks (same probe ids in every run of a window)
WIN = {'FWD_head': ('FWD', 2, 667), 'FWD_mid': ('FWD', 10919, 11485),
       'NF_head': ('NF', 2, 667), 'NF_mid': ('NF', 11153, 11707),
       'CS_mid': ('CS', 7749, 8157), 'FT_mid': ('FT', 7751, 8159)}

def win(name):
    tag, lo, hi = WIN[name]
    return A[(A.tag == tag) & (A.pkt_id >= lo) & (A.pkt_id <= hi)]

# ---------------------------------------------------------------- 1. inventory + per-run stats
print('\n## Per-run statistics of the differential (window = probes in the chunk)')
rows = []
for name in WIN:
    w = win(name)
    for (s, r), g in w.groupby(['session', 'run']):
        x = g['diff'].values
        med = np.median(x)
        rows.append(dict(window=name, session=s, run=r, n=len(x), median=med, mean=x.mean(),
                         sd=x.std(ddof=1), robust_sd=rsd(x), p1=np.percentile(x, 1), p99=np.percentile(x, 99),
                         collapse=float(np.mean(x < med - 100)), negative=float(np.mean(x < 0))))
runs = pd.DataFrame(rows)
print(runs.round(2).to_string(index=False))
RES['runs'] = runs.to_dict('records')

# full runs
print('\n## Full runs (all ids 2..20000, fixture files)')
full = {}
for key, f in [('FWD_s1_run04', FIX + 'tsc/programs/FWD_s1/f_run04.csv'), ('NF_s1_run01', FIX + 'tsc/null/NF_s1/f_run01.csv')]:
    d = clean(pd.read_csv(f), remap=False)
    d = d[d.pkt_id % 100 != 78].sort_values('pkt_id')
    x = d['diff'].values
    full[key] = d
    z = (x - x.mean()) / x.std()
    st = dict(n=len(x), median=float(np.median(x)), mean=float(x.mean()), sd=float(x.std(ddof=1)), robust_sd=rsd(x),
              pct_1_5_25_50_75_95_99=pct(x), p01=float(np.percentile(x, 0.1)), p999=float(np.percentile(x, 99.9)),
              skew=float((z ** 3).mean()), exkurt=float((z ** 4).mean() - 3),
              collapse_frac=float(np.mean(x < np.median(x) - 100)), late_frac=float(np.mean(x > np.median(x) + 100)),
              negative_frac=float(np.mean(x < 0)))
    # lag autocorrelation on the id grid (rows in id order; clipped at p1/p99)
    xc = np.clip(x, np.percentile(x, 1), np.percentile(x, 99)); xc = xc - xc.mean()
    st['acf_rows'] = {k: float(np.corrcoef(xc[:-k], xc[k:])[0, 1]) for k in (1, 2, 3, 5, 10, 20, 50, 100)}
    # medians of consecutive 200-id blocks (start-of-run transient, wander)
    bm = d.groupby(d.pkt_id // 200)['diff'].median()
    st['block200_median_first5'] = bm.values[:5].tolist()
    st['block200_median_sd_after_1000'] = float(bm[bm.index >= 5].std())
    # window medians (569 ids ~ 392 rows) across the run: sampling SD of a chunk's median/mean
    wm, wmean = [], []
    for s0 in range(1000, 19400, 569):
        g = d[(d.pkt_id >= s0) & (d.pkt_id < s0 + 569)]['diff']
        wm.append(np.median(g)); wmean.append(g.mean())
    st['window569_median_sd'] = float(np.std(wm, ddof=1)); st['window569_mean_sd'] = float(np.std(wmean, ddof=1))
    bs = [np.median(RNG.choice(x, 392)) for _ in range(2000)]
    st['iid_bootstrap_median392_sd'] = float(np.std(bs))
    # transient: first 600 ids vs rest
    st['median_ids_2_600'] = float(d[d.pkt_id <= 600]['diff'].median())
    st['median_ids_1000_20000'] = float(d[d.pkt_id >= 1000]['diff'].median())
    st['collapse_ids_2_2000'] = float(np.mean(d[d.pkt_id <= 2000]['diff'] < np.median(x) - 100))
    st['collapse_ids_2000_20000'] = float(np.mean(d[d.pkt_id > 2000]['diff'] < np.median(x) - 100))
    # periodogram on the id grid
    s = pd.Series(d['diff'].values, index=d.pkt_id.values).reindex(range(2, 20001)).interpolate().bfill().ffill()
    y = np.clip(s.values, np.percentile(x, 1), np.percentile(x, 99)); y = y - y.mean()
    p = np.abs(np.fft.rfft(y)) ** 2; fr = np.fft.rfftfreq(len(y))
    top = np.argsort(p[1:])[::-1][:4] + 1
    st['periodogram_top_periods_ids'] = [float(1 / fr[i]) for i in top]
    st['rolling31_median_sd'] = float(s.rolling(31, center=True).median().std())
    if key.startswith('FWD'):
        c = x[x < np.median(x) - 100]
        st['collapse_values_p5_25_50_75_95'] = pct(c, (5, 25, 50, 75, 95))
    else:
        st['null_pos_cluster_median'] = float(np.median(x[x > 0])); st['null_neg_cluster_median'] = float(np.median(x[x < 0]))
    full[key + '_stats'] = st
    print(key, json.dumps(st, indent=None, default=float))
RES['full_runs'] = {k: v for k, v in full.items() if k.endswith('_stats')}

# periodic component in the contiguous-id programs (CS, FT chunks)
print('\n## Slow periodic wander (contiguous ids)')
for name in ('CS_mid', 'FT_mid'):
    x = win(name).sort_values('pkt_id')['diff'].values.astype(float)
    xc = x - x.mean(); p = np.abs(np.fft.rfft(xc)) ** 2; fr = np.fft.rfftfreq(len(xc))
    i = np.argsort(p[1:])[::-1][:3] + 1
    sm = pd.Series(x).rolling(21, center=True).median()
    res = (x - sm.values)[~np.isnan(sm.values)]
    acf = {k: float(np.corrcoef(xc[:-k], xc[k:])[0, 1]) for k in (1, 2, 5, 10, 30, 60, 120)}
    d = dict(top_periods=[float(1 / fr[j]) for j in i], rolling21_median_sd=float(sm.std()), residual_robust_sd=rsd(res),
             robust_sd=rsd(x), acf=acf)
    print(name, json.dumps(d))
    RES['wander_' + name] = d

# ---------------------------------------------------------------- 2. per-probe repeatability across runs
print('\n## Per-probe correlation across runs of one session (same probe ids)')
for name in ('FWD_head', 'NF_head'):
    w = win(name).pivot_table(index='pkt_id', columns='run', values='diff').dropna()
    c = w.corr(); rk = w.rank().corr()
    off = c.values[np.triu_indices(len(c), 1)]; offr = rk.values[np.triu_indices(len(c), 1)]
    print(name, 'runs', list(w.columns), 'n', len(w), 'pearson', np.round(off, 3), 'spearman', np.round(offr, 3))
    RES['cross_run_corr_' + name] = dict(runs=list(map(int, w.columns)), n=len(w), pearson=off.tolist(), spearman=offr.tolist())
# bound on the packet-dependent sd: corr * var
w = win('FWD_head').pivot_table(index='pkt_id', columns='run', values='diff').dropna()
wc = w.clip(lower=100)  # collapses clipped
cc = wc.corr().values[np.triu_indices(3, 1)]
v = wc.var().mean()
RES['packet_part_sd_bound'] = dict(mean_corr=float(cc.mean()), var=float(v), sd_est=float(np.sqrt(max(cc.mean(), 0) * v)),
                                   sd_upper_95=float(np.sqrt((cc.mean() + 2 / np.sqrt(len(wc))) * v)))
print('packet part (collapse-clipped):', RES['packet_part_sd_bound'])

# ---------------------------------------------------------------- 3. session estimator per window
def session_estimates(w):
    out = []
    for s, g in w.groupby('session'):
        pv = g.pivot_table(index='pkt_id', columns='run', values='diff').dropna()
        pm = pv.median(axis=1)  # per probe: median over the session's runs
        out.append(dict(session=int(s), runs=pv.shape[1], probes=len(pv), median=float(np.median(pm)),
                        p99=float(np.percentile(pm, 99)), p1=float(np.percentile(pm, 1)), mean=float(pv.values.mean())))
    return pd.DataFrame(out)

print('\n## Session estimator (per probe median over runs, then median / p99 over probes)')
SESS = {}
for name in WIN:
    se = session_estimates(win(name))
    SESS[name] = se
    print('###', name); print(se.round(2).to_string(index=False))
    if len(se) > 1:
        print('   session medians: range %.1f..%.1f (%.1f ns), SD %.2f' % (se['median'].min(), se['median'].max(),
              se['median'].max() - se['median'].min(), se['median'].std(ddof=1)))
RES['sessions'] = {k: v.to_dict('records') for k, v in SESS.items()}

# ---------------------------------------------------------------- 4. Kalibera-Jones variance components
def kj(w, stat, within_var):
    """Levels: 1 probe, 2 run, 3 session. stat(x) = the level-1 summary of a run (mean or median).

    S1^2: averaged within-run sample variance of probes (for the median the sampling variance of a run's
    median is taken from `within_var`, the empirical variance of window statistics across a full run,
    which includes autocorrelation; we report it as T1^2/n1-equivalent).
    S2^2: pooled within-session variance of run statistics; S3^2: variance of session statistics.
    T1^2 = S1^2, T2^2 = S2^2 - S1^2/n1, T3^2 = S3^2 - S2^2/n2 (n2 harmonic mean of runs per session).
    """
    runs = w.groupby(['session', 'run'])['diff'].agg(list)
    rs = pd.Series({k: stat(np.array(v)) for k, v in runs.items()})
    n1 = np.mean([len(v) for v in runs])
    S1 = np.mean([np.var(v, ddof=1) for v in runs])
    groups = rs.groupby(level=0)
    multi = [g.values for _, g in groups if len(g) > 1]
    S2 = np.sum([np.sum((g - g.mean()) ** 2) for g in multi]) / max(1, sum(len(g) - 1 for g in multi)) if multi else np.nan
    sm = groups.mean()
    S3 = sm.var(ddof=1) if len(sm) > 1 else np.nan
    n2 = len(sm) / np.sum(1.0 / groups.size().values)
    T1 = S1
    T2 = S2 - within_var
    T3 = S3 - S2 / n2 if not np.isnan(S2) else np.nan
    return dict(n1=float(n1), n2=float(n2), sessions=int(len(sm)), S1sq=float(S1), S2sq=float(S2), S3sq=float(S3),
                within_run_sampling_var=float(within_var), T1sq=float(T1), T2sq=float(T2), T3sq=float(T3),
                run_stats={f'{k[0]}.{k[1]}': float(v) for k, v in rs.items()})

print('\n## Kalibera-Jones variance components (ns^2)')
fw = RES['full_runs']['FWD_s1_run04_stats']; nw = RES['full_runs']['NF_s1_run01_stats']
KJ = {}
# FWD: run level from the head window of s1 (3 runs) and s4 (2 runs) in the mid window; session level from mid window.
mid = win('FWD_mid'); head = win('FWD_head')
for label, stat, wv in [('mean', np.mean, fw['window569_mean_sd'] ** 2), ('median', np.median, fw['window569_median_sd'] ** 2)]:
    k_mid = kj(mid, stat, wv)
    k_head = kj(head, stat, wv)
    # pool S2 from both windows (s1 head: 3 runs, s4 mid: 2 runs)
    S2_pool = ((k_head['S2sq'] * 2) + (k_mid['S2sq'] * 1)) / 3
    T2 = S2_pool - wv
    T3 = k_mid['S3sq'] - S2_pool / k_mid['n2']
    KJ['FWD_' + label] = dict(mid=k_mid, head=k_head, S2sq_pooled=S2_pool, T2sq_pooled=T2, T3sq=T3)
    print('FWD', label, json.dumps(dict(S1sq=k_mid['S1sq'], within_run_window_var=wv, S2sq_head=k_head['S2sq'],
          S2sq_mid=k_mid['S2sq'], S2sq_pooled=S2_pool, T2sq=T2, S3sq=k_mid['S3sq'], n2=k_mid['n2'], T3sq=T3), default=float))
nmid = win('NF_mid'); nhead = win('NF_head')
for label, stat, wv in [('mean', np.mean, nw['window569_mean_sd'] ** 2), ('median', np.median, nw['window569_median_sd'] ** 2)]:
    k_mid = kj(nmid, stat, wv); k_head = kj(nhead, stat, wv)
    S2_pool = (k_head['S2sq'] * 1 + k_mid['S2sq'] * 1) / 2
    T2 = S2_pool - wv
    T3 = k_mid['S3sq'] - S2_pool / k_mid['n2']
    KJ['NF_' + label] = dict(mid=k_mid, head=k_head, S2sq_pooled=S2_pool, T2sq_pooled=T2, T3sq=T3)
    print('NF ', label, json.dumps(dict(S1sq=k_mid['S1sq'], within_run_window_var=wv, S2sq_head=k_head['S2sq'],
          S2sq_mid=k_mid['S2sq'], S2sq_pooled=S2_pool, T2sq=T2, S3sq=k_mid['S3sq'], n2=k_mid['n2'], T3sq=T3), default=float))
RES['kalibera_jones'] = KJ

# ---------------------------------------------------------------- 5. hierarchical bootstrap on the observed windows
def est(w):
    """Grand estimator of a window: median over sessions of the session medians; also p99."""
    se = session_estimates(w)
    return float(np.median(se['median'])), float(np.median(se['p99']))

def resample(w, sessions=True, runs=True, block=20):
    parts = []
    sids = w.session.unique()
    pick = RNG.choice(sids, len(sids)) if sessions else sids
    for k, s in enumerate(pick):
        g = w[w.session == s]
        rids = g.run.unique()
        rp = RNG.choice(rids, len(rids)) if runs else rids
        for j, r in enumerate(rp):
            x = g[g.run == r].sort_values('pkt_id')
            ids = x.pkt_id.values; v = x['diff'].values
            # moving-block bootstrap of probes (keeps autocorrelation); ids re-labelled 0..n-1 so that the
            # runs of a session stay paired by position
            nb = int(np.ceil(len(v) / block)); st = RNG.integers(0, len(v) - block + 1, nb)
            vv = np.concatenate([v[t:t + block] for t in st])[:len(v)]
            parts.append(pd.DataFrame(dict(session=k, run=j, pkt_id=np.arange(len(vv)), diff=vv)))
    return pd.concat(parts)

def probes_only(w, block=20):
    return resample(w, sessions=False, runs=False, block=block)

print('\n## Hierarchical bootstrap of the observed windows (B=300, moving blocks of 20 probes)')
HB = {}
for name in ('FWD_mid', 'NF_mid'):
    w = win(name)
    w = w.assign(session=w.session.astype(int), run=w.run.astype(int))
    out = {}
    for lab, fn in [('probes', lambda: resample(w, False, False)), ('runs+probes', lambda: resample(w, False, True)),
                    ('sessions+runs+probes', lambda: resample(w, True, True))]:
        vals = np.array([est(fn()) for _ in range(300)])
        out[lab] = dict(var_median=float(vals[:, 0].var()), var_p99=float(vals[:, 1].var()))
    contrib = dict(probe_median=out['probes']['var_median'],
                   run_median=out['runs+probes']['var_median'] - out['probes']['var_median'],
                   session_median=out['sessions+runs+probes']['var_median'] - out['runs+probes']['var_median'],
                   probe_p99=out['probes']['var_p99'],
                   run_p99=out['runs+probes']['var_p99'] - out['probes']['var_p99'],
                   session_p99=out['sessions+runs+probes']['var_p99'] - out['runs+probes']['var_p99'])
    HB[name] = dict(levels=out, contributions=contrib, point=est(w))
    print(name, json.dumps(HB[name], default=float))
RES['hier_bootstrap_observed'] = HB

# ---------------------------------------------------------------- 6. model-based extrapolation to the paper's design
def synth_session_estimates(pool_runs, sd_sess, sd_run, S=5, R=10, N=14000, block=40, reps=200):
    """Session medians / p99 of the estimator for S sessions x R runs x N probes.

    Probe noise: moving-block bootstrap (blocks of `block` ids) from `pool_runs` (centred full runs),
    so the slow wander and the collapse mixture are kept; run and session shifts normal.
    Returns array reps x S x 2 (median, p99 of per-probe medians).
    """
    pool = [p - np.median(p) for p in pool_runs]
    out = np.empty((reps, S, 2))
    for b in range(reps):
        for s in range(S):
            se = RNG.normal(0, sd_sess)
            M = np.empty((R, N))
            for r in range(R):
                v = pool[RNG.integers(len(pool))]
                st = RNG.integers(0, len(v) - block, int(np.ceil(N / block)))
                M[r] = np.concatenate([v[t:t + block] for t in st])[:N] + se + RNG.normal(0, sd_run)
            pm = np.median(M, axis=0)
            out[b, s] = (np.median(pm), np.percentile(pm, 99))
    return out

print('\n## Extrapolation to 5 sessions x 10 runs x 14,000 probes (Forward) and the null')
fwd_pool = [full['FWD_s1_run04']['diff'].values.astype(float)]
nf_pool = [full['NF_s1_run01']['diff'].values.astype(float)]
T2f = max(KJ['FWD_median']['T2sq_pooled'], 0); T3f = max(KJ['FWD_median']['T3sq'], 0)
T2n = max(KJ['NF_median']['T2sq_pooled'], 0); T3n = max(KJ['NF_median']['T3sq'], 0)
EXT = {}
for lab, pool, sr, ss in [('FWD_noise_only', fwd_pool, 0, 0), ('FWD_calibrated', fwd_pool, np.sqrt(T2f), np.sqrt(T3f)),
                          ('NF_noise_only', nf_pool, 0, 0), ('NF_calibrated', nf_pool, np.sqrt(T2n), np.sqrt(T3n))]:
    o = synth_session_estimates(pool, ss, sr, reps=60)
    rng_med = (o[:, :, 0].max(1) - o[:, :, 0].min(1))
    EXT[lab] = dict(sd_run=float(sr), sd_session=float(ss), sd_session_median=float(o[:, :, 0].std(axis=1, ddof=1).mean()),
                    mean_range_session_median=float(rng_med.mean()), p90_range=float(np.percentile(rng_med, 90)),
                    sd_session_p99=float(o[:, :, 1].std(axis=1, ddof=1).mean()))
    print(lab, json.dumps(EXT[lab]))
RES['extrapolation'] = EXT

# ---------------------------------------------------------------- 7. shape of L-hat from noise alone
print('\n## Quantiles of per-probe medians over R runs of pure noise (Forward noise pool), relative to p50')
x = full['FWD_s1_run04']['diff'].values.astype(float)
SH = {}
for R in (1, 10, 50):
    M = RNG.choice(x, (R, 20000))
    pm = np.median(M, axis=0)
    q = np.percentile(pm, [5, 25, 50, 75, 95, 99]); SH[R] = (q - q[2]).round(1).tolist()
    print('R=%d' % R, SH[R])
paper = np.array([138, 145, 149, 154, 163, 169.]); print('paper Forward L-hat rel p50', (paper - paper[2]).tolist())
cs = np.array([349, 358, 364, 370, 377, 381.]); print('paper Checksum rel p50', (cs - cs[2]).tolist())
RES['lhat_shape_noise_only'] = SH

# ---------------------------------------------------------------- 8. hardware clock (silicon) vs TSC
print('\n## Hardware-clock differential R vs TSC differential D (FWD s1 run 4)')
sil = pd.read_csv(FIX + 'silicon/silicon_FWD_s1_run04.csv')
sil = sil[(sil.pkt_id >= 2) & (sil.pkt_id <= 20000) & (sil.pkt_id % 100 != 78)]
m = full['FWD_s1_run04'].merge(sil, on='pkt_id')
D = m['diff'].values.astype(float); R_ = m.silicon_diff_ns.values.astype(float); C = R_ - D
# re-pairing test: R vs D + C(shuffled)
conv = D + RNG.permutation(C)
SI = dict(n=len(m), median_D=float(np.median(D)), median_R=float(np.median(R_)), robust_sd_D=rsd(D), robust_sd_R=rsd(R_),
          sd_R=float(R_.std()), corr_DR=float(np.corrcoef(D, R_)[0, 1]), median_C=float(np.median(C)), robust_sd_C=rsd(C),
          C_pct_1_5_25_50_75_95_99=pct(C), R_pct=pct(R_), repaired_pct=pct(conv),
          grid_step_ns=6.4, frac_R_on_grid=float(np.mean(np.abs(((R_ / 6.4) - np.round(R_ / 6.4))) < 0.16)))
print(json.dumps(SI))
RES['silicon'] = SI

json.dump(RES, open(os.path.join(OUT, 'results.json'), 'w'), indent=1, default=float)
print('\nwrote', os.path.join(OUT, 'results.json'))
