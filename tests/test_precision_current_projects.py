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
    where = "tests/test_utils/scripts/test_merge_weights.py"  # where accelerate keeps it
    assert codes(src, "DL005", where) == []
    # a test file that writes nothing reads a checkpoint from elsewhere: still reported
    reader = "import torch\ndef check(path):\n    return torch.load(path / 'pytorch_model.bin')\n"
    assert codes(reader, "DL005", where) == [(3, "DL005")]
    # a script named test_*.py outside any test suite (a research repository's evaluation
    # script) is no test reading back its own output
    assert codes(src, "DL005", "test_merge_weights.py") == [(3, "DL005")]
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


def test_dl005_repeated_literal_path_saved_and_loaded_in_one_function():
    # a round trip in one process: the saved devices exist here, whatever they are
    src = ("import torch\ndef roundtrip(model):\n    torch.save(model.state_dict(), 'ckpt.pt')\n"
           "    return torch.load('ckpt.pt')\n")
    assert codes(src, "DL005") == []
    # loaded by another function (a later run, maybe another machine): reported
    split = ("import torch\ndef save(model):\n    torch.save(model.state_dict(), 'ckpt.pt')\n"
             "def load():\n    return torch.load('ckpt.pt')\n")
    assert codes(split, "DL005") == [(5, "DL005")]


def test_dl005_a_path_spelled_another_way_on_the_load_is_the_same_file():
    # `torch.save(sd, path)` ... `torch.load(path.as_posix())` / `str(path)`: the run reads back what it wrote
    for spelled in ("path.as_posix()", "str(path)", "os.fspath(path)", "path.resolve()"):
        src = ("import os\nimport torch\ndef roundtrip(model, path):\n    torch.save(model.state_dict(), path)\n"
               f"    return torch.load({spelled})\n")
        assert codes(src, "DL005") == [], spelled
    # another file (`path.with_suffix(".bak")`, `str(other)`) is no round trip
    for other in ('path.with_suffix(".bak")', "str(other)"):
        src = ("import torch\ndef roundtrip(model, path, other):\n    torch.save(model.state_dict(), path)\n"
               f"    return torch.load({other})\n")
        assert codes(src, "DL005") == [(4, "DL005")], other


def test_dl005_xla_files():
    src = "import torch\nimport torch_xla.core.xla_model as xm\ndef load(path):\n    return torch.load(path)\n"
    assert codes(src, "DL005") == []
    assert codes(src.replace("import torch_xla.core.xla_model as xm\n", ""), "DL005") == [(3, "DL005")]


# ---- DL006 ----------------------------------------------------------------------------------
MODULE = "import torch\nfrom torch import nn\nclass M(nn.Module):\n"


def test_dl006_rebound_host_kernel_then_moved():
    # diffusers downsampling.py / upsampling.py `_downsample_2d`
    src = MODULE + ("    def forward(self, x, kernel=(1, 3, 3, 1), gain=1):\n"
                    "        k = torch.tensor(kernel, dtype=torch.float32)\n"
                    "        if k.ndim == 1:\n            k = torch.outer(k, k)\n        k /= torch.sum(k)\n"
                    "        k = k * gain\n        pad = k.shape[0] - 1\n"
                    "        return conv(x, k.to(device=x.device, dtype=x.dtype), pad)\n")
    assert codes(src, "DL006") == []
    # combined with the (device) input on the way: the mix DL006 is about
    mixed = src.replace("        k = k * gain\n", "        k = k * x\n")
    assert codes(mixed, "DL006") == [(5, "DL006")]
    # never moved: it reaches `conv` on the host
    unmoved = src.replace("k.to(device=x.device, dtype=x.dtype)", "k")
    assert codes(unmoved, "DL006") == [(5, "DL006")]


def test_dl006_helper_result_placed_by_every_caller():
    # lightning demos/transformer.py, blip ctx_clip `_build_causal_attention_mask`
    src = MODULE + ("    def mask(self, size: int):\n        m = torch.triu(torch.ones(size, size), diagonal=1)\n"
                    "        m = m.float().masked_fill(m == 1, float('-inf')).masked_fill(m == 0, 0.0)\n"
                    "        return m\n"
                    "    def forward(self, x):\n        return x + self.mask(x.size(0)).to(x.device)\n")
    assert codes(src, "DL006") == []
    # one caller uses it unmoved
    src2 = src + "    def other(self, x):\n        return self.forward(x) + self.mask(3)\n"
    src2 = src2.replace("return x + self.mask(x.size(0)).to(x.device)",
                        "return x + self.mask(x.size(0)).to(x.device) + self.other(x)")
    assert codes(src2, "DL006") == [(5, "DL006")]


def test_dl006_table_filled_on_host_then_registered_or_placed():
    # kornia loftr position_encoding.py, timm convit.py get_rel_indices
    src = MODULE + ("    def __init__(self, d: int):\n        super().__init__()\n        self.d = d\n"
                    "        pe = self.build((4, 4))\n        self.register_buffer('pe', pe)\n"
                    "    def build(self, shape: tuple):\n        pe = torch.zeros((self.d, *shape))\n"
                    "        y = torch.ones(shape).cumsum(0).float().unsqueeze(0)\n"
                    "        div = torch.exp(torch.arange(0, self.d, 2).float() * 0.5)[:, None, None]\n"
                    "        pe[0::2] = torch.sin(y * div)\n        return pe.unsqueeze(0)\n"
                    "    def forward(self, x):\n        if x.size(-1) != self.pe.size(-1):\n"
                    "            self.pe = self.build(x.shape[-2:]).to(device=self.pe.device)\n"
                    "        return x + self.pe\n")
    assert codes(src, "DL006") == []
    # filled from a device tensor: the table meets the device on the host
    dev = src.replace("pe[0::2] = torch.sin(y * div)", "pe[0::2] = torch.sin(y * self.pe)")
    assert [line for line, _ in codes(dev, "DL006")] == [11, 12]


def test_dl006_returned_python_data_but_not_returned_host_buffers():
    # ultralytics HungarianMatcher, torchvision RandomErasing.get_params (`torch.tensor(value)`)
    src = MODULE + ("    def forward(self, img, value):\n        if value is None:\n"
                    "            v = torch.empty([3, 2, 2]).normal_()\n        else:\n"
                    "            v = torch.tensor(value)[:, None, None]\n        return 0, 0, v\n")
    # the random image-sized buffer drawn on the host is still reported; the data tensor is not
    assert codes(src, "DL006") == [(6, "DL006")]
    used = src.replace("        return 0, 0, v\n", "        return 0, 0, v, img + torch.tensor(value)\n")
    assert codes(used, "DL006") == [(6, "DL006"), (9, "DL006")]


def test_dl006_declared_host_device():
    # kornia ransac.py `_forward_lm`: `host = torch.device("cpu")`, `kp1.to(host)`
    src = MODULE + ("    def forward(self, x):\n        host = torch.device('cpu')\n        xh = x.to(host).double()\n"
                    "        t1 = t2 = torch.eye(3, dtype=torch.float64)\n        return (xh @ t1 @ t2).to(x.device)\n")
    assert codes(src, "DL006") == []
    undeclared = src.replace("host = torch.device('cpu')", "host = x.device")
    assert codes(undeclared, "DL006") == [(7, "DL006")]


# ---- DL007 ----------------------------------------------------------------------------------
def test_dl007_random_test_inputs_drawn_on_the_host():
    # timm tests/test_optim.py: `torch.randn(10, 5).to(torch_device)`
    src = ("import torch\ndef _cases(device):\n    w = torch.randn(10, 5).to(device)\n"
           "    b = torch.zeros(10).to(device)\n    return w, b\n")
    assert codes(src, "DL007", "tests/test_optim.py") == [(4, "DL007")]  # the deterministic one still
    assert codes(src, "DL007", "optim.py") == [(3, "DL007"), (4, "DL007")]


# ---- DL008 ----------------------------------------------------------------------------------
def test_dl008_synchronize_in_test_code_is_a_barrier():
    # torch/testing/_internal/distributed/distributed_test.py (test_ddp_*, _run_uneven_inputs_test)
    loop = ("import torch\nmodel.cuda()\ndef {name}(model, data):\n    for x in data:\n"
            "        model(x).sum().backward()\n        torch.cuda.synchronize()\n")
    for name in ("test_join", "_run_uneven_inputs_test"):
        assert codes(loop.format(name=name), "DL008") == []
    assert codes(loop.format(name="train"), "DL008", "test_train.py") == []
    assert codes(loop.format(name="train"), "DL008") == [(6, "DL008")]
    # a per-step .item() in a test helper is still a sync the loop pays for nothing
    item = loop.format(name="test_join").replace("torch.cuda.synchronize()", "total = total + model(x).sum().item()")
    assert codes(item, "DL008") == [(6, "DL008")]


def test_dl006_private_module_of_a_host_only_file():
    # torchmetrics functional/audio/nisqa.py: `_PoolAttFF`, model built and run on the host only
    src = ("# distributed under the License is distributed on an \"AS IS\" BASIS\n"
           "import torch\nfrom torch import nn\nclass _Pool(nn.Module):\n"
           "    def forward(self, x, n):\n        mask = torch.arange(x.shape[0])[None, :] < n[:, None]\n"
           "        return x * mask\n")
    assert codes(src, "DL006") == []
    assert codes(src.replace("_Pool", "Pool"), "DL006") == [(6, "DL006")]  # public: users may move it
    assert codes(src + "m = _Pool().cuda()\n", "DL006") == [(6, "DL006")]  # the file places it


def test_dl008_licence_header_is_not_a_device():
    src = ("# distributed under the License is distributed on an \"AS IS\" BASIS\nimport torch\n"
           "for x in data:\n    loss = model(x).sum()\n    loss.backward()\n    total += loss.item()\n")
    assert codes(src, "DL008") == []
    assert codes(src.replace("model(x)", "model(x.cuda())"), "DL008") == [(6, "DL008")]
