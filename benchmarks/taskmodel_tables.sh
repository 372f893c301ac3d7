#!/usr/bin/env bash
# Every task-model table of docs/taskmodel.md, from the committed stores in
# benchmarks/results/taskmodel/ (index of all evidence: benchmarks/results/README.md).
#
#   bash benchmarks/taskmodel_tables.sh            # re-print from the stores (seconds)
#   bash benchmarks/taskmodel_tables.sh --measure  # measure what a store lacks (hours
#                                                  # for the 64x12 ones on 2 cores)
#
# Each table goes to benchmarks/results/taskmodel/<name>.log and .json (the HTML page
# next to it, not tracked).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(--stored-only)
[[ "${1:-}" == "--measure" ]] && mode=()
py=.venv/bin/python
R=benchmarks/results/taskmodel
S8=100000,300000,1000000,2000000,3000000,6000000,12000000,24000000

table() {   # table NAME ARGS...: one benchmark run, log + JSON under $R/
    local name=$1; shift
    echo "== $name"
    "$py" benchmarks/taskmodel_eval.py "${mode[@]}" "$@" --json "$R/$name.json" \
        > "$R/$name.log" 2>&1 || { tail -5 "$R/$name.log"; return 1; }
    grep -E "mean \|error\||^none |^all " "$R/$name.log" || true
}

# (a) validation, 4 MiB, every configuration of the space
table taskmodel_eval_small_8x4 --validate 8x4 --layouts '' --store $R/taskmodel_eval.sqlite
table taskmodel_eval_ft_8x12 --platform fattree64x12 --validate 8x12 --layouts '' \
    --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_ft_16x12 --platform fattree64x12 --validate 16x12 --layouts '' \
    --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_ft_bcast_32x12 --platform fattree64x12 --validate 32x12 --layouts '' \
    --colls bcast --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_ft_64x12 --platform fattree64x12 --validate 64x12 --layouts '' \
    --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_df_bcast_32x12 --platform dragonfly --validate 32x12 --layouts '' \
    --colls bcast --store $R/taskmodel_eval_df.sqlite
table taskmodel_eval_df_64x12 --platform dragonfly --validate 64x12 --layouts '' \
    --store $R/taskmodel_eval_df.sqlite
table taskmodel_eval_df_16x12 --platform dragonfly --validate 16x12 --layouts 16x12 \
    --sizes 4194304 --variants none,H3 --evidence --store $R/taskmodel_eval_df.sqlite
table taskmodel_eval_nb_small --validate 8x4 --layouts '' --space han+nb \
    --store $R/taskmodel_eval_nb.sqlite
table taskmodel_eval_flat_small_8x4 --validate 8x4 --layouts '' --colls allreduce \
    --space han+flat --store $R/taskmodel_eval_flat.sqlite

# (b, c, e) accuracy and cost against exhaustive search, per heuristics variant
table taskmodel_eval_small_heur --validate '' --layouts 3x4,6x3 --sizes "$S8" --evidence \
    --store $R/taskmodel_eval.sqlite
table taskmodel_heur_train --validate '' --layouts 4x4,8x2 \
    --sizes 150000,450000,700000,1800000,5000000 --evidence \
    --store $R/taskmodel_heur_train.sqlite
table taskmodel_eval_ft_grid12 --platform fattree64x12 --validate '' --layouts 4x12,6x12 \
    --sizes 100000,300000,1000000,3000000 --evidence --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_ft_grid12_8sizes --platform fattree64x12 --validate '' \
    --layouts 4x12,6x12 --sizes "$S8" --evidence --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_ft_heur_16x12 --platform fattree64x12 --validate '' --layouts 16x12 \
    --sizes 150000,450000,1000000 --evidence --store $R/taskmodel_eval_ft_heur16.sqlite
table taskmodel_eval_df_heur_16x12 --platform dragonfly --validate '' --layouts 16x12 \
    --sizes 150000,450000,1000000 --evidence --store $R/taskmodel_eval_df.sqlite
table taskmodel_eval_df_heur_24x12 --platform dragonfly --validate '' --layouts 24x12 \
    --sizes 200000,330000,450000,1000000 --evidence --store $R/taskmodel_eval_df.sqlite
table taskmodel_eval_flat_small_grid --validate '' --layouts 3x4,6x3 --sizes "$S8" \
    --colls allreduce --space han+flat --variants none,all --store $R/taskmodel_eval.sqlite
table taskmodel_eval_ft_grid_32x12 --platform fattree64x12 --validate '' --layouts 32x12 \
    --sizes 450000,600000,2000000,6000000 --evidence --store $R/taskmodel_eval_ft.sqlite
table taskmodel_eval_df_grid_32x12 --platform dragonfly --validate '' --layouts 32x12 \
    --sizes 450000,600000,2000000,6000000 --evidence --store $R/taskmodel_eval_df.sqlite
