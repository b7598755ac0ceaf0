"""The bar chart of docs/results/webshop/profile.md from the JSON summaries of experiments/webshop_profile_check.py.

python experiments/webshop_profile_plot.py   (from the repository root)
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

base = "docs/results/webshop/"
runs = [
    ("seed 0 / 1,000\nthefuzz 0.19", "profile_check_seed0_1000_thefuzz019.json"),
    ("seed 0 / 1,000\nthefuzz 0.22", "profile_check_seed0_1000_thefuzz022.json"),
    ("seed 1 / 10,000", "profile_check_seed1_10000_thefuzz019.json"),
    ("seed 2 / 1,000", "profile_check_seed2_1000_thefuzz019.json"),
    ("seed 2 / 10,000", "profile_check_seed2_10000_thefuzz019.json"),
    ("seed 4 / 1,000", "profile_check_seed4_1000_thefuzz019.json"),
    ("seed 5 / 1,000", "profile_check_seed5_1000_thefuzz019.json"),
    ("seed 6 / 1,000", "profile_check_seed6_1000_thefuzz019.json"),
    ("seed 7 / 1,000", "profile_check_seed7_1000_thefuzz019.json"),
    ("seed 2 / 1,000\nmedium", "profile_check_seed2_1000_medium_thefuzz019.json"),
    ("seed 2 / 1,000\nhard", "profile_check_seed2_1000_hard_thefuzz019.json"),
    ("loaded\n(seed 3 files)", "profile_check_loaded_seed3_1000_thefuzz019.json"),
    ("loaded\n(seed 5 files)", "profile_check_loaded_seed5_1000_thefuzz019.json"),
]
data = [json.loads(Path(base + f).read_text()) for _, f in runs]
fig, ax = plt.subplots(figsize=(14, 4.5))
x = range(len(runs))
w = 0.38
a = [100 * d["agreement"] for d in data]
m = [100 * d["same_as_milepost_profile"] for d in data]
b1 = ax.bar([i - w / 2 for i in x], a, w, label="webshop profile = WebShop's get_reward")
b2 = ax.bar([i + w / 2 for i in x], m, w, label="milepost profile = WebShop's get_reward")
for bars in (b1, b2):
    for r in bars:
        ax.text(r.get_x() + r.get_width() / 2, r.get_height() + 0.5, f"{r.get_height():.1f}%", ha="center", fontsize=6)
ax.set_xticks(list(x), [f"{label}\n{d['purchases']}" for (label, _), d in zip(runs, data)], fontsize=7)
ax.set_ylim(0, 122)
ax.set_ylabel("purchases with the same reward (%)")
ax.set_title("Reward agreement with princeton-nlp/WebShop's goal.py (run itself); thefuzz 0.19 unless marked")
ax.legend(loc="upper left", ncol=2, fontsize=8)
fig.tight_layout()
fig.savefig(base + "profile.png", dpi=120)
