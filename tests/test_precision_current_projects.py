"""False-alarm patterns found on current projects (accelerate, diffusers, lightning, kornia,
timm, torchvision, ultralytics, torchmetrics) for DL005-DL008, each with the nearby code that
must still be reported: the silence rests on the evidence named in the test, not on luck.
(docs/notes/precision-current-projects.md lists the findings behind each pattern.)"""

from __future__ import annotations

from devlint.engine import Settings, lint_source


def codes(src: str, code: str, filename: str = "mod.py") -> list:
    sel = Settings(select=frozenset({code}))
    return [(d.line, d.code) for d in lint_source(src.encode(), filename, sel).diagnostics]


# ---- DL005 ----------------------------------------------------------------------------------
def test_dl005_test_file_that_writes_through_a_save_helper_reads_back_its_own_output():
    # accelerate test_merge_weights.py: save_fsdp_model / merge_fsdp_weights write, the test reads back
    src = ("import torch\ndef check(path):\n    return torch.load(path / 'pytorch_model.bin', weights_only=True)\n"
           "def main(model, path):\n    save_fsdp_model(model, path)\n    check(path)\n")
    assert codes(src, "DL005", "test_merge_weights.py") == []
    # a test file that writes nothing reads a checkpoint from elsewhere: still reported
    reader = "import torch\ndef check(path):\n    return torch.load(path / 'pytorch_model.bin')\n"
    assert codes(reader, "DL005", "test_merge_weights.py") == [(3, "DL005")]
    # and outside a test file the helper call proves nothing
    assert codes(src, "DL005", "merge_weights.py") == [(3, "DL005")]


def test_dl005_grad_scaler_state_has_no_tensors():
    # accelerate accelerator.py: `scaler_state = torch.load(f); self.scaler.load_state_dict(scaler_state)`
    src = ("import torch\nclass A:\n    def __init__(self, kw):\n        self.scaler = get_grad_scaler(**kw)\n"
           "    def resume(self, f):\n        scaler_state = torch.load(f)\n"
           "        self.scaler.load_state_dict(scaler_state)\n")
    assert codes(src, "DL005") == []
    # the same state also used elsewhere: reported
    used = src + "        return scaler_state\n"
    assert codes(used, "DL005") == [(6, "DL005")]
    # a receiver the file never assigns a GradScaler (a model): reported
    model = src.replace("get_grad_scaler(**kw)", "build_model(**kw)")
    assert codes(model, "DL005") == [(6, "DL005")]


def test_dl005_package_data_path():
    # torchmetrics dists.py: `_PATH = Path(__file__).resolve().parent / ... ; torch.load(str(_PATH))`
    src = ("import torch\nfrom pathlib import Path\n_W = Path(__file__).resolve().parent / 'w.pt'\n"
           "def weights():\n    return torch.load(str(_W))\n")
    assert codes(src, "DL005") == []
    user = src.replace("Path(__file__).resolve().parent", "Path.home()")
    assert codes(user, "DL005") == [(5, "DL005")]


def test_dl005_in_memory_bytes_pickled_from_host_copies():
    # lightning launchers/multiprocessing.py
    src = ("import io\nimport torch\ndef pack(trainer):\n"
           "    metrics = apply_to_collection(trainer.metrics, torch.Tensor, lambda t: t.cpu())\n"
           "    buffer = io.BytesIO()\n    torch.save(metrics, buffer)\n"
           "    return {'metrics_bytes': buffer.getvalue()}\n"
           "def unpack(trainer, extra):\n    metrics = torch.load(io.BytesIO(extra['metrics_bytes']))\n"
           "    trainer.metrics.update(metrics)\n")
    assert codes(src, "DL005") == []
    # pickled as they are (maybe CUDA tensors): reported
    raw = src.replace("apply_to_collection(trainer.metrics, torch.Tensor, lambda t: t.cpu())", "trainer.metrics")
    assert codes(raw, "DL005") == [(9, "DL005")]
    # bytes from elsewhere (the file pickles nothing): reported
    remote = "import io\nimport torch\ndef get(response):\n    return torch.load(io.BytesIO(response.content))\n"
    assert codes(remote, "DL005") == [(4, "DL005")]


def test_dl005_dataset_module_metadata_written_without_placement():
    # torchvision datasets/imagenet.py: parse_devkit_archive saves, load_meta_file loads
    src = ("import os\nimport torch\nfrom torchvision.datasets import ImageFolder\nMETA = 'meta.bin'\n"
           "class ImageNet(ImageFolder):\n    pass\n"
           "def load_meta_file(root, file=None):\n    file = os.path.join(root, file or META)\n"
           "    return torch.load(file, weights_only=True)\n"
           "def parse_devkit_archive(root):\n    classes = parse_meta(root)\n"
           "    torch.save(classes, os.path.join(root, META))\n")
    assert codes(src, "DL005") == []
    placed = src.replace("    classes = parse_meta(root)\n", "    classes = parse_meta(root).cuda()\n")
    assert codes(placed, "DL005") == [(9, "DL005")]
    not_dataset = src.replace("(ImageFolder)", "(object)")
    assert codes(not_dataset, "DL005") == [(9, "DL005")]


def test_dl005_xla_files():
    src = "import torch\nimport torch_xla.core.xla_model as xm\ndef load(path):\n    return torch.load(path)\n"
    assert codes(src, "DL005") == []
    assert codes(src.replace("import torch_xla.core.xla_model as xm\n", ""), "DL005") == [(3, "DL005")]
