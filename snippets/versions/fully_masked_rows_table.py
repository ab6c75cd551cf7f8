# The measured behaviour (fully_masked_rows.json, published beside this
# script) as a Markdown table, one row per run of PyTorch versions that behave
# alike. Run it in the folder that holds the JSON.
import json
from pathlib import Path

measured = json.loads(Path("fully_masked_rows.json").read_text())
columns = {  # the probe's case -> the column's title, short enough for a phone
    "sdpa_default": "SDPA",
    "mha_attn_mask_grad_weights_output": "MHA",
    "mha_attn_mask_grad_no_weights_output": "MHA, no weights",
    "mha_attn_mask_no_grad_no_weights_output": "MHA, no weights, no grad",
}
runs = []  # [first version, last version, the values they share]
for version, cases in measured.items():
    values = [cases[case] for case in columns]
    if runs and runs[-1][2] == values:
        runs[-1][1] = version
    else:
        runs.append([version, version, values])

print("| PyTorch | " + " | ".join(columns.values()) + " |")
print("|---" * (len(columns) + 1) + "|")
for first, last, values in runs:
    versions = first if first == last else f"{first} to {last}"
    print(f"| {versions} | " + " | ".join(values) + " |")
