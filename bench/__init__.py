"""The benchmarks: textnb against its peers, its speed, latency and load.

``python -m bench`` lists the suite by subject and ``python -m bench NAME [ARGS]`` runs
one (bench/__main__.py); each is also ``python -m bench.NAME``, run from the project
folder. Results go to bench/results/*.json (not committed; the runs the docs quote are
under docs/results/).

Helpers the benchmarks share live in modules of their own, and a benchmark imports no
other benchmark, only them:

- ``bench.peers``: the peer filters (bogofilter, spamprobe, scikit-learn) on a
  split written one file per message, their figures and table (also a benchmark);
- ``bench.folds``: a whole corpus cut into folds, and a peer or textnb run fold by fold;
- ``bench.common``: textnb-side helpers (a split tokenised, a corpus with its training
  rows, score a test split, count a filter from token lists and measure it, a
  tokenizer cache);
- ``bench.delivery``: console scripts, trained models, the C client and a
  resident scorer, for the latency scripts;
- ``bench.stats``: the paired stratified bootstrap and a percentile;
- ``bench.bytecode``: textnb's modules compiled before anything is timed.
"""
