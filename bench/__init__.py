"""The benchmarks: textnb against its peers on the public corpora.

Run each script from the project folder as a module, ``python -m bench.NAME``
(``python -m bench.peers --corpus enron``); results go to bench/results/*.json.

Helpers the scripts share live in modules of their own, and a script imports
another only through them:

- ``bench.peers``: the peer filters (bogofilter, spamprobe, scikit-learn) on a
  split written one file per message, their figures and table (also a script);
- ``bench.folds``: a whole corpus cut into folds, and a peer run fold by fold;
- ``bench.common``: textnb-side helpers (score a test split, count a filter from
  token lists and measure it, a tokenizer cache);
- ``bench.delivery``: console scripts, trained models, the C client and a
  resident scorer, for the latency scripts;
- ``bench.stats``: the paired stratified bootstrap and a percentile.
"""
