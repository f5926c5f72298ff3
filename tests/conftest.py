"""Suite-wide settings: everything offline, nothing reaches a hub or wandb."""

import os

# Set before any test module imports transformers / datasets / wandb.
for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "WANDB_SILENT": "true",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)

# pytester runs real pytest sessions for the plugin's own tests.
pytest_plugins = ["pytester"]
