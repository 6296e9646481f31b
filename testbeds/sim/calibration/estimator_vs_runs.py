"""How the estimator (median over probes of per-probe medians over R runs) depends on R for
iid noise drawn from the full fixture runs (Forward and its null). Shows the bias a bimodal null
puts into delta-hat, which a unimodal twin cannot reproduce."""
import numpy as np, pandas as pd
from common import clean
from load import FIX
rng = np.random.default_rng(7)
for key, f in [('FWD_s1_run04', FIX + 'tsc/programs/FWD_s1/f_run04.csv'), ('NF_s1_run01', FIX + 'tsc/null/NF_s1/f_run01.csv')]:
    d = clean(pd.read_csv(f), remap=False); x = d[d.pkt_id % 100 != 78]['diff'].values.astype(float)
    row = []
    for R in (1, 2, 3, 5, 10, 20, 50):
        pm = np.median(rng.choice(x, (R, 20000)), axis=0)
        row.append((R, float(np.median(pm)), float(np.percentile(pm, 99)), float(np.percentile(pm, 5))))
    print(key, 'raw median %.1f mean %.2f' % (np.median(x), x.mean()))
    for R, m, p99, p5 in row:
        print('  R=%2d  median %.1f  p5 %.1f  p99 %.1f' % (R, m, p5, p99))
