"""Project-wide facts (devlint/project.py), through the real CLI: what other files of the
project say about a line, each with the trap that keeps the finding, and a lint cache that
follows an edit of an imported module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from devlint.cli import main
from devlint.project import SUMMARY_VERSION, ProjectIndex, summarize


def write(root: Path, files: dict) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def lint(root: Path, monkeypatch, *paths, cache: bool = False, select: tuple = ()) -> list[tuple[str, int, str]]:
    monkeypatch.chdir(root)
    args = ["check", "--output-format", "json", "--exit-zero", *(paths or ["."])]
    for code in select:  # rules off by default (DL010)
        args += ["--extend-select", code]
    if not cache:
        args.append("--no-cache")
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    return sorted((d["filename"], d["line"], d["code"]) for d in json.loads(res.stdout))


EXITS = ("import sys\nimport torch\nimport layers\n\ndef main():\n    if not torch.cuda.is_available():\n"
         "        print('needs a GPU')\n        sys.exit(1)\n    net = layers.Net()\n    print(net)\n\n"
         "if __name__ == '__main__':\n    main()\n")
RUNS_ANYWHERE = ("import torch\nimport layers\n\nnet = layers.Net()\nprint(net(torch.ones(1, 4)))\n")
LAYERS = ("import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
          "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n    def forward(self, x):\n"
          "        return self.fc(x.cuda())\n")


def test_module_imported_only_by_scripts_that_need_cuda_is_cuda_only(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": EXITS, "test.py": EXITS.replace("def main", "def evaluate").replace("    main()", "    evaluate()"), "layers.py": LAYERS})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "layers.py"] == []


def test_one_importer_that_runs_anywhere_keeps_the_finding(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": EXITS, "demo.py": RUNS_ANYWHERE, "layers.py": LAYERS})
    assert ("layers.py", 10, "DL002") in lint(tmp_path, monkeypatch)


def test_the_index_follows_imports_through_other_modules(tmp_path, monkeypatch):
    """train.py -> search.py -> layers.py: layers is still only reached from a GPU script."""
    write(tmp_path, {"train.py": EXITS.replace("import layers", "import search as layers"),
                     "search.py": "from layers import Net\n", "layers.py": LAYERS})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "layers.py"] == []


ENTRY = ("import sys\nimport torch\n\ndef init_distributed_mode(args=None):\n"
         "    if not torch.cuda.is_available():\n        print('distributed mode needs GPUs')\n        sys.exit(1)\n"
         "    torch.cuda.set_device(0)\n")
NOT_ENTRY = "import torch\n\ndef init_distributed_mode(args=None):\n    torch.manual_seed(0)\n"
SCRIPT = ("import torch\nfrom utils import init_distributed_mode as init\n\ninit()\ntorch.cuda.synchronize()\n"
          "x = torch.ones(2)\nx = x.cuda()\nprint(x)\n")


def test_imported_function_that_exits_without_cuda_guards_what_follows(tmp_path, monkeypatch):
    write(tmp_path, {"utils.py": ENTRY, "train.py": SCRIPT})
    assert [f for f in lint(tmp_path, monkeypatch, "train.py") if f[2] in ("DL002", "DL004")] == []


def test_imported_function_that_does_not_exit_keeps_the_findings(tmp_path, monkeypatch):
    write(tmp_path, {"utils.py": NOT_ENTRY, "train.py": SCRIPT})
    codes = {f[2] for f in lint(tmp_path, monkeypatch, "train.py")}
    assert {"DL002", "DL004"} <= codes


SAVES_HOST = ("import torch\nfrom torch import nn\n\nif __name__ == '__main__':\n    model = nn.Linear(2, 2)\n"
              "    torch.save(model.state_dict(), 'net.pt')\n")
SAVES_DEVICE = SAVES_HOST.replace("nn.Linear(2, 2)", "nn.Linear(2, 2).cuda()")
LOADS = "import torch\nfrom torch import nn\n\nmodel = nn.Linear(2, 2)\nmodel.load_state_dict(torch.load('net.pt'))\n"


def test_checkpoint_written_from_host_data_by_another_script(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": SAVES_HOST, "eval.py": LOADS})
    assert [f for f in lint(tmp_path, monkeypatch, "eval.py") if f[2] == "DL005"] == []


@pytest.mark.parametrize("load", [
    "import torch as th\nfrom torch import nn\n\nmodel = nn.Linear(2, 2)\nmodel.load_state_dict(th.load('net.pt'))\n",
    "from torch import load, nn\n\n\nmodel = nn.Linear(2, 2)\nmodel.load_state_dict(load('net.pt'))\n",
    "import torch\nfrom torch import nn\n\nmodel = nn.Linear(2, 2)\nmodel.load_state_dict(torch . load('net.pt'))\n",
])
def test_checkpoint_facts_reach_every_spelling_of_torch_load(tmp_path, monkeypatch, load):
    """The index reads checkpoint facts only for a file that may call torch.load: however it
    names it (an alias, a from-import), the host save in another script still counts."""
    write(tmp_path, {"train.py": SAVES_HOST, "eval.py": load})
    assert [f for f in lint(tmp_path, monkeypatch, "eval.py") if f[2] == "DL005"] == []
    write(tmp_path, {"train.py": SAVES_DEVICE})
    assert ("eval.py", 5, "DL005") in lint(tmp_path, monkeypatch, "eval.py")


CACHES = ("import os\nimport torch\n\nclass Loader:\n    def __init__(self, data_dir, actions):\n"
          "        stats_path = data_dir + '/data_stats.pth'\n        if os.path.isfile(stats_path):\n"
          "            stats = torch.load(stats_path)\n            self.mean = stats['mean']\n        else:\n"
          "            self.mean = torch.cat(actions, 0).mean(0){place}\n"
          "            torch.save({{'mean': self.mean}}, stats_path)\n")
READS_CACHE = ("import os\nimport torch\nimport dataloader\n\n"
               "stats = torch.load(os.path.join('data', 'data_stats.pth'))\nprint(stats)\n")


@pytest.mark.parametrize("place, reported", [
    # the loader's cache: built on the host in the branch that finds no file
    ("", False),
    # ... unless that branch places what it saves
    (".cuda()", True),
])
def test_a_cache_another_module_writes_from_host_data(tmp_path, monkeypatch, place, reported):
    write(tmp_path, {"dataloader.py": CACHES.format(place=place), "eval.py": READS_CACHE})
    assert (("eval.py", 5, "DL005") in lint(tmp_path, monkeypatch, "eval.py")) is reported
    # in the loader itself, the load reads back what the other branch saved
    assert (("dataloader.py", 8, "DL005") in lint(tmp_path, monkeypatch, "dataloader.py")) is reported


@pytest.mark.parametrize("base, reported", [
    # the project's own dataset base class, in another module (of a package whose name starts
    # with `torch_`, which is no library of torch's)
    ("from torch.utils.data import Dataset\n\nclass BaseSet(Dataset):\n", False),
    # ... and a base that is no dataset keeps the finding
    ("class BaseSet(object):\n", True),
])
def test_a_dataset_deriving_the_projects_dataset_base_in_another_file(tmp_path, monkeypatch, base, reported):
    write(tmp_path, {
        "torch_things/__init__.py": "",
        "torch_things/base.py": base + "    def __len__(self):\n        return 0\n",
        "torch_things/patches.py": ("import torch\nfrom torch_things.base import BaseSet\n\n"
                                    "class Patches(BaseSet):\n    def __init__(self, files):\n        self.files = files\n\n"
                                    "    def __getitem__(self, i):\n        return torch.load(self.files[i])\n"),
    })
    found = lint(tmp_path, monkeypatch, "torch_things/patches.py")
    assert (("torch_things/patches.py", 9, "DL005") in found) is reported, found


GUARDING_DECORATOR = ("import torch\n\n\ndef run_if_cuda(func):\n    def wrapped(*args, **kwargs):\n"
                      "        if torch.cuda.is_available():\n            return func(*args, **kwargs)\n"
                      "        return None\n\n    return wrapped\n")
SKIPPING_DECORATOR = ("import torch\n\n\ndef gpu_test(func):\n    def wrapped(*args):\n"
                      "        if not torch.cuda.is_available():\n            return\n"
                      "        return func(*args)\n\n    return wrapped\n")
# a decorator that runs the function whatever the machine, only logging which device it has
LOGGING_DECORATOR = ("import torch\n\n\ndef run_if_cuda(func):\n    def wrapped(*args, **kwargs):\n"
                     "        if torch.cuda.is_available():\n            print('on a GPU')\n"
                     "        return func(*args, **kwargs)\n\n    return wrapped\n")
DECORATED_TEST = ("import unittest\nimport torch\nfrom helpers import {name}\n\n\nclass T(unittest.TestCase):\n"
                  "    @{name}\n    def test_fps(self):\n        pos = torch.randn(8, 3).cuda()\n"
                  "        self.assertEqual(pos.shape[0], 8)\n")


@pytest.mark.parametrize("helper, name, reported", [
    (GUARDING_DECORATOR, "run_if_cuda", False),
    (SKIPPING_DECORATOR, "gpu_test", False),
    (LOGGING_DECORATOR, "run_if_cuda", True),
])
def test_a_project_decorator_that_runs_its_function_only_with_cuda(tmp_path, monkeypatch, helper, name, reported):
    write(tmp_path, {"helpers.py": helper, "test_fps.py": DECORATED_TEST.format(name=name)})
    found = lint(tmp_path, monkeypatch, "test_fps.py")
    assert (("test_fps.py", 9, "DL002") in found) is reported, found


def test_a_project_decorator_read_through_its_module_name(tmp_path, monkeypatch):
    test = (DECORATED_TEST.format(name="helpers.run_if_cuda")
            .replace("from helpers import helpers.run_if_cuda", "import helpers"))
    write(tmp_path, {"helpers.py": GUARDING_DECORATOR, "test_fps.py": test})
    assert [f for f in lint(tmp_path, monkeypatch, "test_fps.py") if f[2] == "DL002"] == []
    write(tmp_path, {"helpers.py": LOGGING_DECORATOR})
    assert ("test_fps.py", 9, "DL002") in lint(tmp_path, monkeypatch, "test_fps.py")


def test_a_decorator_of_the_same_file_that_runs_its_function_only_with_cuda(tmp_path, monkeypatch):
    body = DECORATED_TEST.format(name="run_if_cuda").replace("from helpers import run_if_cuda\n", "")
    write(tmp_path, {"test_fps.py": GUARDING_DECORATOR + "\n\n" + body})
    assert [f for f in lint(tmp_path, monkeypatch, "test_fps.py") if f[2] == "DL002"] == []
    write(tmp_path, {"test_fps.py": LOGGING_DECORATOR + "\n\n" + body})
    assert [f[2] for f in lint(tmp_path, monkeypatch, "test_fps.py")].count("DL002") == 1


def test_checkpoint_written_from_the_gpu_by_another_script(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": SAVES_DEVICE, "eval.py": LOADS})
    assert ("eval.py", 5, "DL005") in lint(tmp_path, monkeypatch, "eval.py")


@pytest.mark.parametrize("load", ["torch.load('in.pt')", "torch.load('in.pt', map_location=device)"])
def test_checkpoint_resaved_after_a_load_is_not_host_data(tmp_path, monkeypatch, load):
    """A script that loads a checkpoint and saves it again passes on whatever it held."""
    convert = (f"import torch\n\nif __name__ == '__main__':\n    device = 'cuda'\n    sd = {load}\n"
               "    torch.save(sd, 'net.pt')\n")
    write(tmp_path, {"convert.py": convert, "eval.py": LOADS})
    assert ("eval.py", 5, "DL005") in lint(tmp_path, monkeypatch, "eval.py")


@pytest.mark.parametrize("mapped", ["'cpu'", "torch.device('cpu')", "lambda storage, loc: storage", "{'cuda:0': 'cpu'}"])
def test_checkpoint_resaved_after_a_load_mapped_to_the_cpu_is_host_data(tmp_path, monkeypatch, mapped):
    """A conversion script that loads with `map_location="cpu"` holds only host tensors: what it
    saves again (a renamed state dict) loads anywhere."""
    convert = (f"import torch\n\nif __name__ == '__main__':\n    sd = torch.load('in.pt', map_location={mapped})\n"
               "    torch.save({k.replace('model.', ''): v for k, v in sd.items()}, 'net.pt')\n")
    write(tmp_path, {"convert.py": convert, "eval.py": LOADS})
    assert [f for f in lint(tmp_path, monkeypatch, "eval.py") if f[2] == "DL005"] == []


def test_cache_follows_an_edit_of_an_imported_module(tmp_path, monkeypatch):
    """A file's cached result depends on the summaries of the project modules it reads:
    editing one makes the finding appear, and vanish again, with the cache on."""
    write(tmp_path, {"utils.py": ENTRY, "train.py": SCRIPT})
    guarded = [f for f in lint(tmp_path, monkeypatch, "train.py", cache=True) if f[2] == "DL004"]
    assert guarded == []
    assert lint(tmp_path, monkeypatch, "train.py", cache=True) == lint(tmp_path, monkeypatch, "train.py")
    write(tmp_path, {"utils.py": NOT_ENTRY})
    assert ("train.py", 5, "DL004") in lint(tmp_path, monkeypatch, "train.py", cache=True)
    write(tmp_path, {"utils.py": ENTRY})
    assert [f for f in lint(tmp_path, monkeypatch, "train.py", cache=True) if f[2] == "DL004"] == []
    assert (tmp_path / ".devlint_cache" / f"project-v{SUMMARY_VERSION}").is_dir()  # summaries kept by content hash


def test_summary_reads_old_pytorch_scripts():
    """`.cuda(async=True)` (PyTorch <= 0.3) is a syntax error today; its summary still
    reads the script's CUDA requirement."""
    src = (b"import sys\nimport torch\n\ndef main():\n    if not torch.cuda.is_available():\n        sys.exit(1)\n"
           b"    x = torch.ones(2).cuda(async=True)\n\nif __name__ == '__main__':\n    main()\n")
    s = summarize(src)
    assert s is not None and s.script and s.requires_cuda and s.cuda_functions == ["main"]


def test_unreadable_neighbours_say_nothing(tmp_path):
    write(tmp_path, {"broken.py": "def f(:\n", "layers.py": LAYERS})
    facts = ProjectIndex(str(tmp_path)).facts_for(str(tmp_path / "layers.py"))
    assert not facts


def test_a_sibling_that_saves_only_data_says_nothing_about_a_checkpoint_path(tmp_path, monkeypatch):
    """`preprocess.py` saves a vocabulary from host data; `eval.py` loads a checkpoint the
    user names: nothing ties the two, so the load is still reported."""
    prep = ("import torch\n\nif __name__ == '__main__':\n    vocab = {'a': 0, 'b': 1}\n"
            "    torch.save(vocab, 'vocab.pt')\n")
    load = ("import sys\nimport torch\nfrom torch import nn\n\nmodel = nn.Linear(2, 2)\n"
            "model.load_state_dict(torch.load(sys.argv[1]))\n")
    write(tmp_path, {"preprocess.py": prep, "eval.py": load})
    assert ("eval.py", 6, "DL005") in lint(tmp_path, monkeypatch, "eval.py")
    # a sibling training script that saves its model from host data does speak for it
    write(tmp_path, {"train.py": SAVES_HOST.replace("'net.pt'", "sys.argv[1]").replace("import torch\n",
                                                                                       "import sys\nimport torch\n", 1)})
    assert [f for f in lint(tmp_path, monkeypatch, "eval.py") if f[2] == "DL005"] == []


BASE = ("from torch import nn\n\nclass BaseModel(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.steps = 0\n")
BASE_NOT_A_MODULE = "class BaseModel:\n    def __init__(self):\n        self.steps = 0\n"
BASE_MOVES = ("import torch.nn as nn\n\nclass BaseModel(nn.Module):\n    def _apply(self, fn, recurse=True):\n"
              "        self.kernel = fn(self.kernel)\n        return super()._apply(fn, recurse)\n")
DERIVED = ("import torch\nfrom models.base import BaseModel\n\nclass Net(BaseModel):\n    def __init__(self):\n"
           "        super().__init__()\n        self.kernel = torch.ones(3)\n")
DERIVED_ALIAS = ("import torch\nimport models.base as mb\n\nclass Net(mb.BaseModel):\n    def __init__(self):\n"
                 "        super().__init__()\n        self.kernel = torch.ones(3)\n")
DERIVED_RELATIVE = ("import torch\nfrom .base import BaseModel\n\nclass Head(BaseModel):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.bias = torch.zeros(2)\n        self.steps = torch.zeros(())\n")


def test_a_class_deriving_a_project_module_from_another_file_is_a_module(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "models/__init__.py": "", "models/base.py": BASE,
                     "net.py": DERIVED, "net_alias.py": DERIVED_ALIAS, "models/head.py": DERIVED_RELATIVE})
    found = [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL009"]
    # `self.steps` is an attribute the base owns: assigning it is the base's business, no finding
    assert found == [("models/head.py", 7, "DL009"), ("net.py", 7, "DL009"), ("net_alias.py", 7, "DL009")]


def test_a_project_base_that_moves_its_attributes_or_is_no_module_keeps_silence(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "models/__init__.py": "", "models/base.py": BASE_MOVES, "net.py": DERIVED})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL009"] == []
    write(tmp_path, {"models/base.py": BASE_NOT_A_MODULE})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL009"] == []


def test_cache_follows_an_edit_of_a_base_class_in_another_file(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "models/__init__.py": "", "models/base.py": BASE, "net.py": DERIVED})
    assert ("net.py", 7, "DL009") in lint(tmp_path, monkeypatch, "net.py", cache=True)
    write(tmp_path, {"models/base.py": BASE_NOT_A_MODULE})
    assert [f for f in lint(tmp_path, monkeypatch, "net.py", cache=True) if f[2] == "DL009"] == []
    write(tmp_path, {"models/base.py": BASE})
    assert ("net.py", 7, "DL009") in lint(tmp_path, monkeypatch, "net.py", cache=True)


def test_kept_facts_follow_a_new_importer_in_the_directory(tmp_path, monkeypatch):
    """Facts kept under the cache are reused only while every file and directory they were
    read from is unchanged: a new script beside the module (a directory entry) counts."""
    write(tmp_path, {"train.py": EXITS, "layers.py": LAYERS})
    assert [f for f in lint(tmp_path, monkeypatch, "layers.py", cache=True) if f[0] == "layers.py"] == []
    assert list((tmp_path / ".devlint_cache" / f"project-v{SUMMARY_VERSION}" / "facts").rglob("*.json"))
    assert [f for f in lint(tmp_path, monkeypatch, "layers.py", cache=True) if f[0] == "layers.py"] == []
    write(tmp_path, {"demo.py": RUNS_ANYWHERE})
    assert ("layers.py", 10, "DL002") in lint(tmp_path, monkeypatch, "layers.py", cache=True)


DIST_HELPERS = ("import pickle\nimport torch\nfrom torch import distributed as dist\n\n"
                "def get_world_size():\n    if not dist.is_available():\n        return 1\n"
                "    if not dist.is_initialized():\n        return 1\n    return dist.get_world_size()\n\n"
                "def all_gather(data):\n    world_size = get_world_size()\n    if world_size == 1:\n"
                "        return [data]\n    t = torch.ByteTensor(list(pickle.dumps(data))).to('cuda')\n    return [t]\n")
TRAIN_DIST = ("import argparse\nimport torch\nfrom dist_utils import all_gather\n\n"
              "p = argparse.ArgumentParser()\np.add_argument('--backend', default='{backend}')\nargs = p.parse_args()\n"
              "if args.distributed:\n    torch.distributed.init_process_group(backend=args.backend)\n"
              "print(all_gather({{'loss': 1.0}}))\n")


def test_helpers_run_distributed_only_by_nccl_programs_need_no_guard(tmp_path, monkeypatch):
    """In a module whose importing scripts start only NCCL process groups, code past
    `if world_size == 1: return` runs distributed, on GPUs; a gloo program keeps the finding."""
    write(tmp_path, {"dist_utils.py": DIST_HELPERS, "train.py": TRAIN_DIST.format(backend="nccl")})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "dist_utils.py"] == []
    write(tmp_path, {"train.py": TRAIN_DIST.format(backend="gloo")})
    assert ("dist_utils.py", 16, "DL002") in lint(tmp_path, monkeypatch)


def test_a_method_call_is_no_call_of_the_scripts_gpu_check():
    # `model.train()` is nn.Module.train, not the script's `def train` that exits without a GPU
    src = (
        "import sys, torch\n"
        "def train(model):\n"
        "    if not torch.cuda.is_available():\n"
        "        sys.exit('needs a GPU')\n"
        "model = torch.nn.Linear(2, 2)\n"
        "model.train()\n"
    )
    assert summarize(src.encode()).requires_cuda is False
    assert summarize((src + "train(model)\n").encode()).requires_cuda is True


MEMORY = ("import torch\n\nclass MemoryBank:\n    def __init__(self, n):\n        self.features = torch.zeros(n, 4)\n\n"
          "    def mine(self, k):\n        import faiss\n        index = faiss.IndexFlatIP(4)\n"
          "        index = faiss.index_cpu_to_all_gpus(index)\n        index.add(self.features.cpu().numpy())\n"
          "        return index.search(self.features.cpu().numpy(), k)\n")
MINES = ("import torch\nfrom utils.memory import MemoryBank\n\ndef main():\n    model = torch.nn.Linear(4, 4).cuda()\n"
         "    bank = MemoryBank(10)\n    bank.features = model(bank.features.cuda())\n    print(bank.mine(5))\n\n"
         "if __name__ == '__main__':\n    main()\n")


def test_a_script_that_mines_with_faiss_on_the_gpu_needs_cuda(tmp_path, monkeypatch):
    """A method of a project class (another file) that moves a faiss index to the GPUs has no CPU
    path; a script that calls it on every run, on an instance it made, is CUDA-only."""
    write(tmp_path, {"utils/__init__.py": "", "utils/memory.py": MEMORY, "mine.py": MINES})
    assert [f for f in lint(tmp_path, monkeypatch, "mine.py") if f[2] == "DL002"] == []


@pytest.mark.parametrize("change", [
    ("index = faiss.index_cpu_to_all_gpus(index)", "pass"),  # a CPU index: runs anywhere
    ("    print(bank.mine(5))", "    if len(sys.argv) > 1:\n        print(bank.mine(5))"),  # only on some runs
    ("    bank = MemoryBank(10)", "    bank = MemoryBank(10)\n    bank = make_bank()"),  # rebound to something else
])
def test_a_mining_script_that_can_run_without_a_gpu_keeps_its_findings(tmp_path, monkeypatch, change):
    old, new = change
    memory, mines = MEMORY.replace(old, new), MINES.replace(old, new).replace("import torch\n", "import sys\nimport torch\n", 1)
    assert (memory, mines) != (MEMORY, MINES)
    write(tmp_path, {"utils/__init__.py": "", "utils/memory.py": memory, "mine.py": mines})
    assert ("mine.py", 6, "DL002") in lint(tmp_path, monkeypatch, "mine.py")


PREDICTOR = ("import torch\nfrom cog import BasePredictor, Input\n\nclass Predictor(BasePredictor):\n"
             "    def setup(self):\n        self.net = torch.nn.Linear(4, 4).cuda()\n\n"
             "    def predict(self, n: int = Input(default=1)) -> float:\n"
             "        return self.net(torch.ones(n, 4).cuda()).sum().item()\n")
COG_GPU = "build:\n  gpu: true\n  python_version: \"3.10\"\npredict: \"predict.py:Predictor\"\n"


def test_a_cog_predictor_built_for_a_gpu_is_cuda_only(tmp_path, monkeypatch):
    """Cog runs `predict.py` only in the image `cog.yaml` builds; `gpu: true` makes it a GPU one."""
    write(tmp_path, {"cog.yaml": COG_GPU, "predict.py": PREDICTOR, "demo.py": "import torch\nnet = torch.nn.Linear(2, 2).cuda()\n"})
    found = lint(tmp_path, monkeypatch)
    # the portability findings go; the host build copied to the GPU (DL007) is still a wasted copy
    assert [f for f in found if f[0] == "predict.py"] == [("predict.py", 9, "DL007")]
    assert ("demo.py", 2, "DL002") in found  # not a predictor: runs wherever it is started


@pytest.mark.parametrize("cog", [COG_GPU.replace("gpu: true", "gpu: false"), None])
def test_a_cog_predictor_without_a_gpu_image_keeps_its_findings(tmp_path, monkeypatch, cog):
    write(tmp_path, {"predict.py": PREDICTOR, **({"cog.yaml": cog} if cog else {})})
    assert ("predict.py", 6, "DL002") in lint(tmp_path, monkeypatch)


def test_cache_follows_an_edit_of_cog_yaml(tmp_path, monkeypatch):
    write(tmp_path, {"cog.yaml": COG_GPU, "predict.py": PREDICTOR})
    assert [f for f in lint(tmp_path, monkeypatch, cache=True) if f[2] == "DL002"] == []
    write(tmp_path, {"cog.yaml": COG_GPU.replace("gpu: true", "gpu: false")})
    assert ("predict.py", 6, "DL002") in lint(tmp_path, monkeypatch, cache=True)


SPLITS = ("import torch\n\ndef split_batch(batch):\n    return batch[:, :-1], batch[:, -1:]\n\n"
          "def fields(batch):\n    return batch['x'], batch['y']\n")
MOVES = ("import torch\nfrom utils import split_batch, fields\nimport utils\n\n"
         "def step(model, batch, device):\n    x, y = split_batch(batch)\n    x.to(device)\n"
         "    a, b = utils.split_batch(batch)\n    b.to(device)\n"
         "    p, q = fields(batch)\n    p.to(device)\n    return model(x), y, a, q\n")


def test_values_unpacked_from_a_project_function_that_splits_tensors(tmp_path, monkeypatch):
    write(tmp_path, {"utils.py": SPLITS, "train.py": MOVES})
    found = [f for f in lint(tmp_path, monkeypatch, "train.py") if f[2] == "DL001"]
    # `fields` returns items of a mapping (a BatchEncoding's move in place): silent
    assert found == [("train.py", 7, "DL001"), ("train.py", 9, "DL001")]
    assert summarize(SPLITS.encode()).tensor_returns == ["split_batch"]


CHAIN = {
    "pyproject.toml": "",
    "pkg/__init__.py": "",
    "pkg/distributed/__init__.py": ("import os\nimport torch\nimport torch.distributed as dist\n\n"
                                    "def enable():\n    if os.environ.get('RANK') is None:\n"
                                    "        raise RuntimeError('launch with torchrun')\n"
                                    "    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
                                    "    dist.init_process_group(backend='nccl')\n"),
    "pkg/utils/__init__.py": "",
    "pkg/utils/config.py": ("import os\nfrom pkg import distributed\n\ndef default_setup(args):\n"
                            "    distributed.enable()\n\ndef setup(args):\n    os.makedirs(args.out, exist_ok=True)\n"
                            "    default_setup(args)\n    return args\n"),
    "pkg/eval/__init__.py": "",
    # a module of the package called setup.py: not a project marker
    "pkg/eval/setup.py": ("import torch\nfrom pkg.utils.config import setup\n\ndef setup_and_build_model(args):\n"
                          "    setup(args)\n    return torch.nn.Linear(2, 2).cuda()\n"),
    "pkg/eval/linear.py": ("import sys\nimport torch\nfrom pkg.eval.setup import setup_and_build_model\n\n"
                           "def evaluate(model):\n    torch.cuda.synchronize()\n    return model(torch.ones(2).cuda())\n\n"
                           "def main(args):\n    model = setup_and_build_model(args)\n    return evaluate(model)\n\n"
                           "if __name__ == '__main__':\n    sys.exit(main(sys.argv))\n"),
}


def test_a_requirement_reached_through_calls_into_other_modules(tmp_path, monkeypatch):
    """linear.py's main() calls setup_and_build_model (pkg/eval/setup.py), which calls setup
    (pkg/utils/config.py), which calls distributed.enable(), which starts NCCL: the script and
    the module it imports run only on GPUs, whatever the helpers are called."""
    write(tmp_path, CHAIN)
    assert [f for f in lint(tmp_path, monkeypatch) if f[0].startswith("pkg/eval/") and f[2] in ("DL002", "DL004")] == []
    # the same chain, but enable() no longer needs a GPU: every finding comes back
    write(tmp_path, {"pkg/distributed/__init__.py": CHAIN["pkg/distributed/__init__.py"].replace(
        "    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n", "").replace("'nccl'", "'gloo'")})
    found = {(f[0], f[2]) for f in lint(tmp_path, monkeypatch)}
    assert {("pkg/eval/linear.py", "DL004"), ("pkg/eval/setup.py", "DL002")} <= found


def test_a_helper_that_returns_early_without_cuda_guards_nothing_after_its_call(tmp_path, monkeypatch):
    """`timed()` returns when CUDA is absent: its caller goes on without a GPU, so the script
    is not CUDA-only and its own unguarded synchronize is still reported."""
    write(tmp_path, {
        "pyproject.toml": "",
        "timing.py": ("import torch\n\ndef timed(fn):\n    if not torch.cuda.is_available():\n        return fn()\n"
                      "    torch.cuda.synchronize()\n    return fn()\n"),
        "bench.py": ("import torch\nfrom timing import timed\n\ndef main():\n    timed(lambda: 1)\n"
                     "    torch.cuda.synchronize()\n\nif __name__ == '__main__':\n    main()\n"),
    })
    assert ("bench.py", 6, "DL004") in lint(tmp_path, monkeypatch)


def test_a_tree_without_markers_is_rooted_where_its_top_package_lives(tmp_path, monkeypatch):
    """A copy of a project without .git or pyproject.toml: a module inside a package still
    sees the scripts beside the package (the directory `import pkg.mod` is resolved from)."""
    from devlint.project import find_root
    write(tmp_path, {"proj/dist/__init__.py": "from .helpers import all_gather\n",
                     "proj/dist/helpers.py": DIST_HELPERS,
                     "proj/train.py": TRAIN_DIST.format(backend="nccl").replace("from dist_utils", "from dist")})
    assert find_root(str(tmp_path / "proj/dist/helpers.py")) == str(tmp_path / "proj")
    assert find_root(str(tmp_path / "proj/train.py")) == str(tmp_path / "proj")
    assert [f for f in lint(tmp_path / "proj", monkeypatch) if f[0] == "dist/helpers.py"] == []


# a launcher whose process group pins one GPU per rank, however its backend is spelled
LAUNCH = {
    "os": ("import os\nimport torch\n\ndef init():\n    backend = 'gloo' if os.name == 'nt' else 'nccl'\n"
           "    torch.distributed.init_process_group(backend=backend, init_method='env://')\n"),
    "pinned": ("import os\nimport torch\n\ndef init():\n    torch.distributed.init_process_group(init_method='env://')\n"
               "    torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', '0')))\n"),
    # CPU fallback: the backend follows CUDA's presence, nothing pins a GPU
    "fallback": ("import os\nimport torch\n\ndef init():\n"
                 "    backend = 'nccl' if torch.cuda.is_available() else 'gloo'\n"
                 "    torch.distributed.init_process_group(backend=backend, init_method='env://')\n"),
}
AFTER_INIT = ("import torch\nimport launch\n\ndef main(x):\n    launch.init()\n    x = x.cuda()\n"
              "    print(x)\n\nif __name__ == '__main__':\n    main(torch.ones(2))\n")


def test_a_script_after_a_gpu_process_group_launcher_is_cuda_only(tmp_path, monkeypatch):
    """`gloo if os.name == 'nt' else nccl` is NCCL off Windows, and a process group whose
    block calls `torch.cuda.set_device` gives each rank a GPU; a backend chosen by CUDA's
    presence is a CPU fallback and keeps the finding."""
    for kind in ("os", "pinned"):
        write(tmp_path, {"pyproject.toml": "", "launch.py": LAUNCH[kind], "train.py": AFTER_INIT})
        assert ("train.py", 6, "DL002") not in lint(tmp_path, monkeypatch, "train.py"), kind
    write(tmp_path, {"launch.py": LAUNCH["fallback"]})
    assert ("train.py", 6, "DL002") in lint(tmp_path, monkeypatch, "train.py")


def test_a_launcher_that_may_return_without_a_process_group_guards_nothing(tmp_path, monkeypatch):
    """`else: return` before the launch (not distributed): the caller goes on without a GPU."""
    launcher = LAUNCH["pinned"].replace(
        "def init():\n", "def init():\n    if 'RANK' in os.environ:\n        rank = 0\n    else:\n        return\n")
    write(tmp_path, {"pyproject.toml": "", "launch.py": launcher, "train.py": AFTER_INIT})
    assert ("train.py", 6, "DL002") in lint(tmp_path, monkeypatch, "train.py")


def test_each_launcher_branch_starting_a_gpu_group_makes_the_script_cuda_only(tmp_path, monkeypatch):
    """`if launcher == 'pytorch': <pin + init> elif launcher == 'slurm': <pin + init> else: raise`
    in the script itself: past the call, every way on has a GPU; the `set_device` calls are
    part of the launch."""
    src = ("import os\nimport torch\nimport torch.distributed as dist\n\n"
           "def init_dist(launcher, backend='nccl'):\n    if launcher == 'pytorch':\n"
           "        torch.cuda.set_device(int(os.environ['RANK']))\n        dist.init_process_group(backend=backend)\n"
           "    elif launcher == 'slurm':\n        torch.cuda.set_device(int(os.environ['SLURM_PROCID']))\n"
           "        dist.init_process_group(backend=backend)\n    else:\n        raise NotImplementedError(launcher)\n\n"
           "def main(x):\n    init_dist('pytorch')\n    x = x.to('cuda')\n    print(x)\n\n"
           "if __name__ == '__main__':\n    main(torch.ones(2))\n")
    write(tmp_path, {"pyproject.toml": "", "train.py": src})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] in ("DL002", "DL004")] == []
    # a branch that goes on without a process group: the script runs on a CPU, findings stay
    write(tmp_path, {"train.py": src.replace("raise NotImplementedError(launcher)", "print('single process')")})
    assert {"DL002"} <= {f[2] for f in lint(tmp_path, monkeypatch)}


def test_a_helper_saving_what_its_caller_passes_is_no_host_data(tmp_path, monkeypatch):
    """EarlyStopping.save_checkpoint(model, path) saves whatever model its caller passes (a
    GPU one), even though its module places nothing itself."""
    tools = ("import torch\nimport matplotlib\nmatplotlib.use('agg')\n\n"
             "def save_checkpoint(model, path):\n    torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')\n")
    write(tmp_path, {"pyproject.toml": "", "tools.py": tools,
                     "train.py": ("import torch\nfrom torch import nn\nimport tools\n\nmodel = nn.Linear(2, 2)\n"
                                  "model.load_state_dict(torch.load('out/checkpoint.pth'))\n")})
    assert ("train.py", 6, "DL005") in lint(tmp_path, monkeypatch, "train.py")


SAMPLER = ("import torch\n\nclass Sampler:\n    def __init__(self, model, device=torch.device('cuda')):\n"
           "        self.model = model\n        self.steps = torch.zeros(4).to(device)\n")


def test_a_cuda_default_is_reported_where_a_call_in_another_file_leaves_it(tmp_path, monkeypatch):
    """A class built only through a registry (`{"s": Sampler}`), or only with `device=`, never
    runs its CUDA default; one script calling `Sampler(model)` elsewhere in the project does,
    unless that script is built on a CUDA-only package anyway."""
    write(tmp_path, {"pyproject.toml": "", "pkg/__init__.py": "", "pkg/sampler.py": SAMPLER,
                     "pkg/registry.py": "from pkg.sampler import Sampler\nSAMPLERS = {'s': Sampler}\n",
                     "scripts/run.py": "import torch\nfrom pkg.sampler import Sampler\nSampler(None, device=torch.device('cpu'))\n"})
    assert ("pkg/sampler.py", 4, "DL002") not in lint(tmp_path, monkeypatch, cache=True)
    write(tmp_path, {"scripts/trt.py": "import tensorrt\nfrom pkg.sampler import Sampler\nSampler(None)\n"})
    assert ("pkg/sampler.py", 4, "DL002") not in lint(tmp_path, monkeypatch, cache=True)
    write(tmp_path, {"scripts/demo.py": "from pkg.sampler import Sampler\ns = Sampler(None)\n"})
    assert ("pkg/sampler.py", 4, "DL002") in lint(tmp_path, monkeypatch, cache=True)


LOSS = ("import torch.nn as nn\n\nclass JointsMSELoss(nn.Module):\n    def __init__(self, use_target_weight):\n"
        "        super().__init__()\n        self.criterion = nn.MSELoss(reduction='mean')\n"
        "        self.use_target_weight = use_target_weight\n\n    def forward(self, out, target):\n"
        "        if self.use_target_weight:\n            out = out * 2\n        return self.criterion(out, target)\n")
TRAIN_LOSS = ("import sys\nimport torch\nsys.path.insert(0, 'lib')\nfrom core.loss import JointsMSELoss\n\n"
              "criterion = JointsMSELoss(use_target_weight=True).cuda()\nprint(criterion)\n")


def test_cuda_of_a_project_module_holding_nothing_moves_nothing(tmp_path, monkeypatch):
    """`JointsMSELoss(...).cuda()` where the class (lib/core/loss.py, imported through the
    `lib/` source root) holds only a weightless loss and a flag: no tensor to move, nothing
    raises; a class with a parameter keeps the finding."""
    write(tmp_path, {"pyproject.toml": "", "lib/core/__init__.py": "", "lib/core/loss.py": LOSS,
                     "tools/train.py": TRAIN_LOSS})
    assert ("tools/train.py", 6, "DL002") not in lint(tmp_path, monkeypatch)
    write(tmp_path, {"lib/core/loss.py": LOSS.replace("        self.use_target_weight = use_target_weight\n",
                                                       "        self.scale = nn.Parameter(torch.ones(1))\n")})
    assert ("tools/train.py", 6, "DL002") in lint(tmp_path, monkeypatch)


def test_hubconf_entry_points_run_without_a_gpu(tmp_path, monkeypatch):
    """A model module imported only by GPU scripts is CUDA-only, unless torch.hub's
    `hubconf.py` also exposes it: whoever loads the model from the hub runs it on a CPU too."""
    write(tmp_path, {"pyproject.toml": "", "train.py": EXITS, "layers.py": LAYERS})
    assert ("layers.py", 10, "DL002") not in lint(tmp_path, monkeypatch)
    write(tmp_path, {"hubconf.py": "dependencies = ['torch']\nfrom layers import Net\n\ndef net():\n    return Net()\n"})
    assert ("layers.py", 10, "DL002") in lint(tmp_path, monkeypatch)


def test_project_root_option_names_the_root_of_a_tree_without_markers(tmp_path, monkeypatch):
    """Without .git or pyproject.toml, `tools/train.py` sees only its own directory; with
    `--project-root .` it reads `lib/` as the project's source root."""
    write(tmp_path, {"lib/core/__init__.py": "", "lib/core/loss.py": LOSS, "tools/train.py": TRAIN_LOSS})
    assert ("tools/train.py", 6, "DL002") in lint(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["check", "--output-format", "json", "--exit-zero", "--no-cache",
                                    "--project-root", ".", "."], catch_exceptions=False)
    assert ("tools/train.py", 6, "DL002") not in {(d["filename"], d["line"], d["code"]) for d in json.loads(res.stdout)}


def test_a_file_importing_a_cuda_extension_the_project_builds_is_cuda_only(tmp_path, monkeypatch):
    """`import window_process` where the project's setup.py builds it with CUDAExtension, or
    `from .backend import _backend` bound to `cpp_extension.load(..., sources=[...".cu"])`:
    the file hands tensors to a CUDA kernel, so it runs only on GPUs; a module of the same
    name the project does not compile keeps the finding."""
    test = "import torch\nimport window_process\n\nx = torch.randn(2, 3)\nx = x.cuda()\nprint(window_process.run(x))\n"
    write(tmp_path, {"pyproject.toml": "", "kernels/unit_test.py": test,
                     "kernels/setup.py": ("from setuptools import setup\n"
                                          "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
                                          "setup(name='wp', ext_modules=[CUDAExtension('window_process', "
                                          "['window_process.cpp', 'window_process_kernel.cu'])])\n")})
    assert ("kernels/unit_test.py", 5, "DL002") not in lint(tmp_path, monkeypatch)
    backend = ("import os\nfrom torch.utils.cpp_extension import load\n"
               "_backend = load(name='_march', sources=[os.path.join('src', 'march.cu')])\n")
    user = ("import torch\n\ndef march(rays):\n    from .backend import _backend\n"
            "    if not rays.is_cuda: rays = rays.cuda()\n    return _backend.march(rays)\n")
    write(tmp_path, {"march/__init__.py": "", "march/backend.py": backend, "march/march.py": user})
    assert ("march/march.py", 5, "DL002") not in lint(tmp_path, monkeypatch)
    write(tmp_path, {"kernels/setup.py": "from setuptools import setup\nsetup(name='wp')\n"})
    assert ("kernels/unit_test.py", 5, "DL002") in lint(tmp_path, monkeypatch)


def test_an_extension_in_a_project_package_is_found_beside_python_imports(tmp_path, monkeypatch):
    """`from ops import nms_cuda`, where `ops/` is a package of the project and its setup.py
    builds `ops.nms_cuda`: the name is no Python submodule, so the file is CUDA-only even though
    its other imports (the standard library, torch, numpy, a sibling module) are plain Python.
    Trap: `from ops import nms` naming a Python submodule keeps the finding."""
    body = ("import os\nimport numpy as np\nimport torch\nimport helpers\nfrom ops import {}\n\n"
            "x = torch.randn(2, 3)\nx = x.cuda()\nprint(x, helpers, np, os)\n")
    setup = ("from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
             "setup(name='ops', ext_modules=[CUDAExtension('ops.nms_cuda', ['ops/nms.cu'])])\n")
    write(tmp_path, {"pyproject.toml": "", "setup.py": setup, "ops/__init__.py": "", "ops/nms.py": "",
                     "helpers.py": "import torch\n", "run.py": body.format("nms_cuda")})
    assert ("run.py", 8, "DL002") not in lint(tmp_path, monkeypatch, "run.py")
    write(tmp_path, {"run.py": body.format("nms")})
    assert ("run.py", 8, "DL002") in lint(tmp_path, monkeypatch, "run.py")


def test_a_file_importing_only_python_modules_reads_no_setup_py(tmp_path, monkeypatch):
    """A one-file run (the pre-commit hook's) of a module whose imports are the standard
    library, torch, installed Python packages and the project's own modules does not look for
    the extensions the project builds (a listing of the whole tree and a read of every
    setup.py, the largest part of a one-file run in a large library). A file importing
    something that may be a compiled extension does look."""
    read = []
    real = ProjectIndex._built_extensions
    monkeypatch.setattr(ProjectIndex, "_built_extensions", lambda self: read.append(self.root) or real(self))
    body = ("import os\nfrom typing import Any\nimport click\nimport torch\nfrom .helpers import scale\n\n"
            "x = torch.ones(2)\nx = scale(x.cuda())\nprint(os, Any, click, x)\n")
    write(tmp_path, {"pyproject.toml": "", "pkg/__init__.py": "", "pkg/helpers.py": "def scale(x):\n    return x\n",
                     "pkg/run.py": body, "setup.py": "from setuptools import setup\nsetup(name='pkg')\n"})
    assert lint(tmp_path, monkeypatch, "pkg/run.py") == [("pkg/run.py", 8, "DL002")]
    assert read == []
    write(tmp_path, {"pkg/run.py": body.replace("import click\n", "import window_process as click\n")})
    assert lint(tmp_path, monkeypatch, "pkg/run.py") == [("pkg/run.py", 8, "DL002")]
    assert read != []


PLACES = ("import torch\n\ndef to_var(x):\n    if torch.cuda.is_available():\n        x = x.cuda()\n    return x\n")
WRAPS = ("import torch\n\ndef to_var(x):\n    return x.float()\n")
FEEDS = ("import torch\nfrom torch import nn\nimport helpers\n\nmodel = nn.Linear(4, 2)\nhelpers.to_var(model)\n"
         "for step in range(3):\n    x = helpers.to_var(torch.randn(8, 4))\n    print(model(x).sum().item())\n")


def test_a_script_placing_through_a_project_helper_uses_the_gpu(tmp_path, monkeypatch):
    """DL010 (no device anywhere) is about the file's program, not its spelling: a helper in
    another module that moves what it is given is the script's device placement. Its trap: a
    helper that moves nothing keeps the finding, and editing the helper (cache on) flips it."""
    write(tmp_path, {"helpers.py": PLACES, "train.py": FEEDS})
    assert lint(tmp_path, monkeypatch, "train.py", cache=True, select=("DL010",)) == []
    (tmp_path / "helpers.py").write_text(WRAPS)
    assert lint(tmp_path, monkeypatch, "train.py", cache=True, select=("DL010",)) == [("train.py", 5, "DL010")]
    # a helper that only follows where its input already is chooses no device either
    (tmp_path / "helpers.py").write_text("import torch\n\ndef to_var(x):\n    eye = torch.eye(2)\n"
                                         "    if x.is_cuda:\n        eye = eye.cuda()\n    return x.to(eye.device)\n")
    assert lint(tmp_path, monkeypatch, "train.py", cache=True, select=("DL010",)) == [("train.py", 5, "DL010")]
    # the same call spelled after `from helpers import to_var`
    write(tmp_path, {"helpers.py": PLACES, "train.py": FEEDS.replace("import helpers", "from helpers import to_var")
                     .replace("helpers.to_var", "to_var")})
    assert lint(tmp_path, monkeypatch, "train.py", cache=True, select=("DL010",)) == []


FALLBACK = ("import torch\n\ndef get_feature(text, device=None):\n    if not device:\n        device = 'cuda'\n"
            "    return text.to(device)\n")


def test_a_none_default_filled_with_cuda_is_judged_as_a_default_across_files(tmp_path, monkeypatch):
    """`if not device: device = "cuda"` is the default a caller who omits the argument gets: with
    every call in the project passing a device it is never reached; one call that omits it (the
    trap) brings the finding back."""
    write(tmp_path, {"feats.py": FALLBACK, "api.py": "from feats import get_feature\n\n"
                     "def speak(text, device):\n    return get_feature(text, device)\n"})
    assert lint(tmp_path, monkeypatch) == []
    write(tmp_path, {"demo.py": "from feats import get_feature\nprint(get_feature('abc'))\n"})
    assert lint(tmp_path, monkeypatch) == [("feats.py", 5, "DL002")]


def test_a_helper_saving_host_copies_makes_the_programs_checkpoints_host(tmp_path, monkeypatch):
    """A project helper that saves a list it fills with `.to("cpu")` copies writes host data: a
    script importing it loads such files without a map_location. Its trap: the same helper
    filling the list with the parameters themselves keeps the finding."""
    helper = ("import torch\n\ndef save_weights(model, path):\n    weights = []\n    for p in model.parameters():\n"
              "        weights.append(p.detach().to('cpu').half())\n    torch.save(weights, path)\n")
    script = ("import sys\nimport torch\nimport lora\n\nweights = torch.load(sys.argv[1])\nprint(len(weights))\n")
    write(tmp_path, {"lora.py": helper, "merge.py": script})
    assert lint(tmp_path, monkeypatch, "merge.py") == []
    write(tmp_path, {"lora.py": helper.replace("p.detach().to('cpu').half()", "p")})
    assert lint(tmp_path, monkeypatch, "merge.py") == [("merge.py", 5, "DL005")]


VALIDATE = ("import torch\n\ndef validate(val_loader, model):\n    for i, (x, y) in enumerate(val_loader):\n"
            "        y = y.cuda()\n        out = model(x.cuda())\n        print(out.sum().item(), y.cpu().numpy().sum())\n")


def _dl003_messages(root: Path, monkeypatch) -> list[str]:
    monkeypatch.chdir(root)
    res = CliRunner().invoke(main, ["check", "--output-format", "json", "--exit-zero", "--no-cache", "--select", "DL003",
                                    "function.py"], catch_exceptions=False)
    return [d["message"] for d in json.loads(res.stdout) if d["line"] == 7]


def test_a_parameter_every_caller_fills_with_a_dataloader_yields_host_batches(tmp_path, monkeypatch):
    """DL003's copied-back batch: `validate(val_loader, ...)` is called from another file with a
    DataLoader, so `y` is a host batch item from the loader, moved unchanged and copied back each
    iteration. A caller passing a plain list of host tensors leaves the same round trip (the loop's
    own item moved in place: nothing moves a tensor to the device it is on), said without the loader."""
    caller = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nfrom function import validate\n\n"
              "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.ones(4, 1)), batch_size=2)\n"
              "validate(loader, torch.nn.Linear(2, 1).cuda())\n")
    write(tmp_path, {"function.py": VALIDATE, "train.py": caller})
    assert ("function.py", 7, "DL003") in lint(tmp_path, monkeypatch)
    assert ["from the loader" in m for m in _dl003_messages(tmp_path, monkeypatch)] == [True]
    write(tmp_path, {"train.py": caller.replace("validate(loader,", "validate([(torch.ones(2, 2), torch.ones(2, 1))],")})
    assert ["this iteration's host item" in m for m in _dl003_messages(tmp_path, monkeypatch)] == [True]


GPU_TRAINER = ("import torch\nfrom torch import nn\n\nclass Trainer:\n    def __init__(self, model):\n"
               "        self.model = model\n\n    def prep_for_training(self, rank):\n"
               "        self.model = nn.parallel.DistributedDataParallel(\n            self.model.cuda(),\n"
               "            device_ids=[rank],\n        )\n")
SUBCLASS = ("import torch\nfrom trainer import Trainer\n\nclass ClsTrainer(Trainer):\n"
            "    def validate(self, loader):\n        for x, y in loader:\n"
            "            print(self.model(x.cuda()).argmax(1).eq(y.cuda()).sum().item())\n")


def test_a_subclass_of_a_project_gpu_trainer_runs_on_gpus_only(tmp_path, monkeypatch):
    """A base trainer in another file that always wraps the model in DDP with device ids cannot
    run without CUDA, and neither can its subclasses. Its trap: a base that wraps only when
    asked to run distributed keeps the subclass's findings."""
    write(tmp_path, {"trainer.py": GPU_TRAINER, "cls_trainer.py": SUBCLASS})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "cls_trainer.py"] == []
    write(tmp_path, {"trainer.py": GPU_TRAINER.replace("        self.model = nn.parallel", "        if rank >= 0:\n"
                                                        "            self.model = nn.parallel")})
    assert [f[2] for f in lint(tmp_path, monkeypatch) if f[0] == "cls_trainer.py"] == ["DL002", "DL002"]


def test_a_checkpoint_of_python_numbers_saved_by_a_helper_is_host_data(tmp_path, monkeypatch):
    """`torch.save({'epoch': epoch + 1}, join(path, 'misc.pt'))` in a helper writes Python numbers:
    a script loading 'misc.pt' needs no map_location. Its trap: a dict holding a tensor name."""
    helper = ("import os\nimport torch\n\ndef save_checkpoint(model, epoch, path):\n"
              "    torch.save(model, os.path.join(path, 'model.pt'))\n"
              "    torch.save({'epoch': epoch + 1}, os.path.join(path, 'misc.pt'))\n")
    script = ("import os\nimport torch\nfrom utils import save_checkpoint\n\n"
              "epoch = torch.load(os.path.join('ckpt', 'misc.pt'))['epoch']\nprint(epoch)\n")
    write(tmp_path, {"utils.py": helper, "train.py": script})
    assert lint(tmp_path, monkeypatch, "train.py") == []
    write(tmp_path, {"utils.py": helper.replace("{'epoch': epoch + 1}", "{'epoch': epoch + 1, 'best': best}")})
    assert lint(tmp_path, monkeypatch, "train.py") == [("train.py", 5, "DL005")]


def test_a_warm_run_sees_every_project_fact_a_cold_run_sees(tmp_path):
    """The lint cache keeps a file's project facts beside what they were read from. Later runs
    (separate processes, as a hook's are) that reuse them report what a cold run reports: no fact
    is dropped on the way through the cache (here: a project base class that trains on GPUs)."""
    write(tmp_path, {"trainer.py": GPU_TRAINER, "cls_trainer.py": SUBCLASS})

    def run(*args):
        res = subprocess.run([sys.executable, "-m", "devlint", "check", "--output-format", "json",
                              "--exit-zero", *args, "."], cwd=tmp_path, capture_output=True, text=True, check=True)
        return sorted((d["filename"], d["line"], d["code"]) for d in json.loads(res.stdout))

    cold = run("--no-cache")
    assert [f for f in cold if f[0] == "cls_trainer.py"] == []
    assert run("--select", "DL002,DL003") == [f for f in cold if f[2] in ("DL002", "DL003")]
    assert run() == cold  # the facts kept by the run before, under another rule selection
    assert run() == cold


KERNEL = "import torch\nimport causal_conv1d_cuda\n\ndef conv(x, w):\n    return causal_conv1d_cuda.fwd(x, w)\n"
LAYER = "import torch\nfrom kernels import conv\n\nclass Block(torch.nn.Module):\n    pass\n"
RUN = ("import torch\nfrom layers import Block\n\nif __name__ == '__main__':\n"
       "    x = torch.randn(2, 3, device='cuda')\n    print(Block(), x)\n")


def test_a_program_whose_imports_need_a_compiled_cuda_kernel_is_cuda_only(tmp_path, monkeypatch):
    """run.py imports layers.py, which imports kernels.py, which imports a compiled CUDA
    extension at its top: the script cannot start without CUDA, so its CUDA tensor is by design.
    Its traps: an import the module only tries (with a fallback), and a project module that
    happens to be named like an extension, keep the finding."""
    write(tmp_path, {"kernels.py": KERNEL, "layers.py": LAYER, "run.py": RUN})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "run.py"] == []
    write(tmp_path, {"kernels.py": KERNEL.replace("import causal_conv1d_cuda\n", "try:\n    import causal_conv1d_cuda\n"
                                                  "except ImportError:\n    causal_conv1d_cuda = None\n")})
    assert ("run.py", 5, "DL002") in lint(tmp_path, monkeypatch)
    write(tmp_path, {"kernels.py": KERNEL, "causal_conv1d_cuda.py": "def fwd(x, w):\n    return x\n"})
    assert ("run.py", 5, "DL002") in lint(tmp_path, monkeypatch)


def test_a_program_importing_a_tensorrt_runtime_is_cuda_only(tmp_path, monkeypatch):
    """A project module built on TensorRT (no CPU path) makes the script that imports it
    CUDA-only; one built on Triton (which installs with torch on Linux) does not."""
    write(tmp_path, {"trt_runner.py": "import tensorrt as trt\n\nclass Runner:\n    pass\n",
                     "run.py": RUN.replace("from layers import Block", "from trt_runner import Runner as Block")})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "run.py"] == []
    write(tmp_path, {"trt_runner.py": "import triton\n\nclass Runner:\n    pass\n"})
    assert ("run.py", 5, "DL002") in lint(tmp_path, monkeypatch)


DIST = ("import torch.distributed as dist\n\ndef is_dist_avail_and_initialized():\n"
        "    if not dist.is_available():\n        return False\n    if not dist.is_initialized():\n"
        "        return False\n    return True\n\ndef init_distributed_mode(rank, world):\n"
        "    dist.init_process_group(backend='nccl', rank=rank, world_size=world)\n")
METRICS = ("import torch\nimport torch.distributed as dist\nfrom dist_utils import is_dist_avail_and_initialized\n\n"
           "class SmoothedValue:\n    def __init__(self):\n        self.total = 0.0\n\n"
           "    def synchronize_between_processes(self):\n        if not is_dist_avail_and_initialized():\n"
           "            return\n        t = torch.tensor([self.total], device='cuda')\n        dist.all_reduce(t)\n"
           "        self.total = t.item()\n")


def test_a_project_helper_asking_whether_the_nccl_group_is_up_guards_the_gpu_branch(tmp_path, monkeypatch):
    """`if not is_dist_avail_and_initialized(): return` with the helper in another file: past it a
    process group is up, and every group the project starts is NCCL, so the CUDA tensor is by
    design. Its traps: a project whose group may be gloo, and a helper that asks only whether
    torch.distributed is available, keep the finding."""
    write(tmp_path, {"dist_utils.py": DIST, "metrics.py": METRICS})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "metrics.py"] == []
    write(tmp_path, {"dist_utils.py": DIST.replace("backend='nccl'", "backend='gloo'")})
    assert ("metrics.py", 12, "DL002") in lint(tmp_path, monkeypatch)
    write(tmp_path, {"dist_utils.py": DIST.replace("    if not dist.is_initialized():\n        return False\n", "")})
    assert ("metrics.py", 12, "DL002") in lint(tmp_path, monkeypatch)


def test_summary_reads_which_functions_ask_whether_a_process_group_is_up():
    src = (b"import torch.distributed as dist\n\ndef is_enabled():\n    \"\"\"docs\"\"\"\n"
           b"    return dist.is_available() and dist.is_initialized()\n\n"
           b"def available():\n    return dist.is_available()\n\n"
           b"def maybe():\n    if not dist.is_initialized():\n        return False\n    return dist.get_rank() == 0\n")
    assert summarize(src).dist_checks == ["is_enabled"]


HEAD = ("import torch\nfrom torch import nn\n\nclass Detect(nn.Module):\n    def __init__(self, stride):\n"
        "        super().__init__()\n        self.stride = torch.tensor(stride)\n        self.conv = nn.Conv2d(3, 3, 1)\n\n"
        "    def forward(self, x):\n        return self.conv(x) * self.stride[0]\n")
MODEL = ("import torch\nfrom torch import nn\nfrom models.head import Detect\n\nclass Model(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n        self.detect = Detect([8, 16])\n\n"
         "    def _apply(self, fn):\n        self = super()._apply(fn)\n"
         "        self.detect.stride = fn(self.detect.stride)\n        return self\n")


def test_an_attribute_the_holding_models_apply_moves_is_carried_along(tmp_path, monkeypatch):
    """YOLO-style heads: `Detect.stride` is a plain tensor attribute, but the model that holds the
    head (another file, importing it) moves it in its `_apply` override, so `model.to(device)`
    carries it. Traps: an `_apply` moving another attribute, and one in a module that does not
    import the head, leave the finding."""
    write(tmp_path, {"setup.py": "", "models/__init__.py": "", "models/head.py": HEAD, "models/yolo.py": MODEL})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL009"] == []
    write(tmp_path, {"models/yolo.py": MODEL.replace("detect.stride", "detect.anchors")})
    assert ("models/head.py", 7, "DL009") in lint(tmp_path, monkeypatch)
    write(tmp_path, {"models/yolo.py": MODEL.replace("from models.head import Detect\n", "from other import Detect\n")})
    assert ("models/head.py", 7, "DL009") in lint(tmp_path, monkeypatch)
    # the cache follows an edit of the module holding the `_apply`
    write(tmp_path, {"models/yolo.py": MODEL})
    assert [f for f in lint(tmp_path, monkeypatch, "models/head.py", cache=True) if f[2] == "DL009"] == []
    write(tmp_path, {"models/yolo.py": MODEL.replace("detect.stride", "detect.anchors")})
    assert ("models/head.py", 7, "DL009") in lint(tmp_path, monkeypatch, "models/head.py", cache=True)


TOOLS = ("import torch\n\nclass EarlyStopping:\n    def __init__(self, patience=3):\n        self.best = None\n\n"
         "    def __call__(self, loss, model, path):\n        if self.best is None or loss < self.best:\n"
         "            self.best = loss\n            torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')\n")
EXP = ("import torch\nfrom tools import EarlyStopping\n\n"
       "def train(model, losses, path):\n    early_stopping = EarlyStopping(patience=3)\n"
       "    for loss in losses:\n        early_stopping(loss, model, path)\n"
       "    best_model_path = path + '/' + 'checkpoint.pth'\n"
       "    model.load_state_dict(torch.load(best_model_path))\n    return model\n\n"
       "def test(model, path):\n    model.load_state_dict(torch.load(path + '/' + 'checkpoint.pth'))\n")


def test_a_project_saver_handed_the_path_earlier_in_the_run_saved_the_file(tmp_path, monkeypatch):
    """Reloading the best epoch: `early_stopping(loss, model, path)` (a project class, another
    file, whose call saves under `path`) then `torch.load(path + '/checkpoint.pth')` in the same
    function reads what this run wrote on this machine. `test()` loads the same file with no
    save before it (a checkpoint from another run, maybe a GPU machine's): still reported, as is a
    load after a saver handed another location."""
    write(tmp_path, {"tools.py": TOOLS, "exp.py": EXP})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == [("exp.py", 13, "DL005")]
    write(tmp_path, {"exp.py": EXP.replace("early_stopping(loss, model, path)", "early_stopping(loss, model, '/tmp')")})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == [("exp.py", 9, "DL005"), ("exp.py", 13, "DL005")]
    write(tmp_path, {"exp.py": EXP, "tools.py": TOOLS.replace("torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')",
                                                           "print(path)")})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == [("exp.py", 9, "DL005"), ("exp.py", 13, "DL005")]


MAYBE_DIST = ("import os\nimport torch\nimport torch.distributed as dist\n\ndef maybe_init_dist():\n    try:\n"
              "        world_size = int(os.environ['WORLD_SIZE'])\n        if world_size < 2:\n            return None\n"
              "    except KeyError:\n        return None\n    rank = int(os.environ['RANK'])\n"
              "    torch.cuda.set_device(rank)\n    dist.init_process_group(backend='nccl', rank=rank, world_size=world_size)\n"
              "    return rank\n")
GENERATE = ("import argparse\nimport torch\nfrom tp import maybe_init_dist\n\ndef main(device):\n"
            "    rank = maybe_init_dist()\n    net = torch.nn.Linear(2, 2).cuda()\n    print(net, rank)\n\n"
            "if __name__ == '__main__':\n    main('cpu')\n")


def test_a_launcher_that_returns_early_inside_a_try_guards_nothing(tmp_path, monkeypatch):
    """`maybe_init_dist()` (gpt-fast): without torchrun, or with one process, it returns before
    it starts the NCCL group, so the script goes on without a GPU and its `.cuda()` is reported.
    The same launcher without those early returns makes the script CUDA-only."""
    write(tmp_path, {"tp.py": MAYBE_DIST, "generate.py": GENERATE})
    assert ("generate.py", 7, "DL002") in lint(tmp_path, monkeypatch)
    write(tmp_path, {"tp.py": MAYBE_DIST.replace("        if world_size < 2:\n            return None\n", "")
                     .replace("    except KeyError:\n        return None\n", "    except KeyError:\n        raise\n")})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "generate.py"] == []


LORA = ("import torch\n\ndef save_lora_weight(model, path):\n    weights = []\n    for p in model.parameters():\n"
        "        weights.append(p.detach().to('cpu'))\n    torch.save(weights, path)\n")
LORA_GPU = ("import torch\n\ndef save_lora_weight(model, path):\n    weights = [p.detach() for p in model.parameters()]\n"
            "    torch.save(model.state_dict(), path)\n")
NOTEBOOK_LIKE = ("import torch\nfrom lora_diffusion import save_lora_weight\n\n"
                 "weights = torch.load('../lora_illust.pt')\nprint(len(weights))\n")


def test_a_file_no_save_names_in_a_program_that_saves_host_data_is_host_data(tmp_path, monkeypatch):
    """`torch.load("../lora_illust.pt")`: no save of the project spells that name (a command line
    chose it), and every checkpoint the program saves, through the package's `__init__`
    re-export, is moved to the host by the saving code: the file is one of those. Traps: a
    saving helper that keeps the device, and a name the project saves from device data."""
    files = {"setup.py": "", "lora_diffusion/__init__.py": "from .lora import *\n", "lora_diffusion/lora.py": LORA,
             "scripts/demo.py": NOTEBOOK_LIKE}
    write(tmp_path, files)
    assert [f for f in lint(tmp_path, monkeypatch, "scripts/demo.py") if f[2] == "DL005"] == []
    write(tmp_path, {"lora_diffusion/lora.py": LORA_GPU})
    assert ("scripts/demo.py", 4, "DL005") in lint(tmp_path, monkeypatch, "scripts/demo.py")
    write(tmp_path, {"lora_diffusion/lora.py": LORA + "\ndef save_full(model):\n"
                     "    torch.save(model.state_dict(), '../lora_illust.pt')\n"})
    assert ("scripts/demo.py", 4, "DL005") in lint(tmp_path, monkeypatch, "scripts/demo.py")


def test_a_model_zoo_file_named_in_a_config_module_is_host_data(tmp_path, monkeypatch):
    """`from .config import res152_path` with `res152_path = os.path.join(root, "resnet152-b121ed2d.pth")`:
    the torch.hub name (its SHA-256 prefix) says it is a model-zoo download, published from host
    tensors. A file of the project's own naming keeps the finding."""
    config = "import os\nroot = '/data/pretrained'\nres152_path = os.path.join(root, 'resnet152-b121ed2d.pth')\n"
    model = ("import torch\nfrom torchvision import models\nfrom .config import res152_path\n\n"
             "def build():\n    net = models.resnet152()\n    net.load_state_dict(torch.load(res152_path))\n"
             "    return net\n")
    write(tmp_path, {"setup.py": "", "models/__init__.py": "", "models/config.py": config, "models/net.py": model})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == []
    write(tmp_path, {"models/config.py": config.replace("resnet152-b121ed2d.pth", "resnet152-best.pth")})
    assert ("models/net.py", 7, "DL005") in lint(tmp_path, monkeypatch)


FUSED = ("import os\nfrom torch.utils.cpp_extension import load\n\nmodule_path = os.path.dirname(__file__)\n"
         "fused = load(\n    'fused',\n    sources=[\n        os.path.join(module_path, 'fused_bias_act.cpp'),\n"
         "        os.path.join(module_path, 'fused_bias_act_kernel.cu'),\n    ],\n)\n\n"
         "def fused_leaky_relu(x):\n    return fused.fused_bias_act(x)\n")
GAN_SCRIPT = ("import torch\nfrom model import Generator\n\ndevice = 'cuda'\ng = Generator().to(device)\n"
              "ckpt = torch.load('g.pt')\ng.load_state_dict(ckpt)\n")
GAN_MODEL = ("import torch\nfrom torch import nn\nfrom op import fused_leaky_relu\n\n"
             "class Generator(nn.Module):\n    def forward(self, x):\n        return fused_leaky_relu(x)\n")


def test_a_project_module_compiling_a_cuda_extension_at_import_makes_its_program_cuda_only(tmp_path, monkeypatch):
    """`op/fused_act.py` builds a `.cu` extension with `cpp_extension.load` when imported: every
    script importing it (here through `model` and the `op` package) cannot start without CUDA.
    Traps: the build under an availability check, or from C++ sources only, guards nothing."""
    write(tmp_path, {"op/__init__.py": "from .fused_act import fused_leaky_relu\n", "op/fused_act.py": FUSED,
                     "model.py": GAN_MODEL, "generate.py": GAN_SCRIPT})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "generate.py"] == []
    guarded = FUSED.replace("fused = load(", "fused = None\nif __import__('torch').cuda.is_available():\n  fused = load(")
    guarded = guarded.replace("\n    'fused',", "\n      'fused',")
    write(tmp_path, {"op/fused_act.py": guarded})
    found = lint(tmp_path, monkeypatch)
    assert ("generate.py", 4, "DL002") in found and ("generate.py", 6, "DL005") in found
    write(tmp_path, {"op/fused_act.py": FUSED.replace("        os.path.join(module_path, 'fused_bias_act_kernel.cu'),\n", "")})
    assert ("generate.py", 4, "DL002") in lint(tmp_path, monkeypatch)


SAC = ("import numpy as np\nimport torch\nfrom torch import nn\n\nclass Policy(nn.Module):\n"
       "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 1)\n"
       "        self.log_alpha = torch.tensor(np.log(0.01))\n\n    def forward(self, x):\n"
       "        return self.fc(x) * self.log_alpha.exp()\n\n"
       "if __name__ == '__main__':\n    print(Policy()(torch.ones(1, 3)))\n")


def test_a_script_that_names_no_device_leaves_no_attribute_behind(tmp_path, monkeypatch):
    """DL009: a script that never names a device runs its modules on the host, so a plain tensor
    attribute is never left behind by a move. Trap: once another script imports its class and
    moves it to the GPU, the finding is back."""
    write(tmp_path, {"sac.py": SAC})
    assert lint(tmp_path, monkeypatch) == []
    assert lint(tmp_path, monkeypatch, cache=True) == []
    write(tmp_path, {"train_gpu.py": "import torch\nfrom sac import Policy\n\n"
                                     "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                                     "net = Policy().to(device)\nprint(net(torch.ones(1, 3, device=device)))\n"})
    assert ("sac.py", 9, "DL009") in lint(tmp_path, monkeypatch)
    assert ("sac.py", 9, "DL009") in lint(tmp_path, monkeypatch, "sac.py", cache=True)  # the cache follows the new importer


# ---- eighth round: a mandatory extension import in `try:`, directories put on sys.path ------------

PN_SETUP = ("from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
            "setup(name='pointnet2', ext_modules=[CUDAExtension(name='pointnet2._ext', sources=['a.cu'])],\n"
            "      cmdclass={'build_ext': BuildExtension})\n")
PN_UTILS = ("import torch\ntry:\n    import builtins\nexcept:\n    import __builtin__ as builtins\n\n"
            "try:\n    import pointnet2._ext as _ext\nexcept ImportError:\n"
            "    if not getattr(builtins, '__POINTNET2_SETUP__', False):\n"
            "        raise ImportError('Could not import _ext module: build it first')\n\n"
            "def fps(xyz, n):\n    return _ext.furthest_point_sampling(xyz, n)\n")
PN_BACKBONE = ("import os\nimport sys\nimport numpy as np\nimport torch\nfrom torch import nn\n"
               "BASE_DIR = os.path.dirname(os.path.abspath(__file__))\nROOT_DIR = os.path.dirname(BASE_DIR)\n"
               "sys.path.append(os.path.join(ROOT_DIR, 'pointnet2'))\nfrom pointnet2_utils import fps\n\n"
               "class Backbone(nn.Module):\n    def forward(self, x):\n        return fps(x, 8)\n\n"
               "if __name__ == '__main__':\n    net = Backbone().cuda()\n    x = torch.from_numpy(np.random.rand(2, 16, 3)).float()\n"
               "    print(net(x.cuda()))\n")


PN_CHECK = "import torch\nimport pointnet2_utils\n\nnet = torch.nn.Linear(2, 2).cuda()\nprint(net)\n"


def test_an_extension_import_that_must_succeed_in_try_makes_its_importers_cuda_only(tmp_path, monkeypatch):
    """votenet's shape: `pointnet2_utils.py` imports the CUDA extension the project builds inside
    `try:`, and its handler raises, so a script importing that module cannot start without the
    extension, whatever it calls. Trap: a handler that falls back (`_ext = None`) makes the
    import optional, and the script's `.cuda()` is a finding again."""
    write(tmp_path, {"pointnet2/setup.py": PN_SETUP, "pointnet2/pointnet2_utils.py": PN_UTILS,
                     "pointnet2/check.py": PN_CHECK})
    assert lint(tmp_path, monkeypatch) == []
    write(tmp_path, {"pointnet2/pointnet2_utils.py": PN_UTILS.replace(
        "    if not getattr(builtins, '__POINTNET2_SETUP__', False):\n"
        "        raise ImportError('Could not import _ext module: build it first')\n", "    _ext = None\n")})
    assert lint(tmp_path, monkeypatch) == [("pointnet2/check.py", 4, "DL002")]


def test_imports_resolve_in_a_directory_the_file_puts_on_sys_path(tmp_path, monkeypatch):
    """`models/backbone.py` appends `ROOT_DIR/pointnet2` to `sys.path` and imports
    `pointnet2_utils` from there: its forward calls the CUDA extension, so its self-test is
    CUDA-only. Trap: without the `sys.path` line the import resolves nowhere (as Python's would
    not) and the `.cuda()` of the self-test is a finding."""
    (tmp_path / ".git").mkdir()  # a checkout: one project from its root
    write(tmp_path, {"pointnet2/setup.py": PN_SETUP, "pointnet2/pointnet2_utils.py": PN_UTILS,
                     "models/backbone.py": PN_BACKBONE})
    assert lint(tmp_path, monkeypatch) == []
    write(tmp_path, {"models/backbone.py": PN_BACKBONE.replace("sys.path.append(os.path.join(ROOT_DIR, 'pointnet2'))\n", "")})
    assert ("models/backbone.py", 17, "DL002") in lint(tmp_path, monkeypatch)


FFI_BUILD = ("import torch\nfrom torch.utils.ffi import create_extension\n\nsources = ['src/dcn.c']\nwith_cuda = False\n"
             "if torch.cuda.is_available():\n    sources += ['src/dcn_cuda.c']\n    with_cuda = True\n"
             "else:\n    raise ValueError('CUDA is not available')\n\n"
             "ffi = create_extension('_ext.dcn', headers=[], sources=sources, relative_to=__file__,\n"
             "                       with_cuda=with_cuda)\n\nif __name__ == '__main__':\n    ffi.build()\n")
FFI_FUNC = ("import torch\nfrom torch.autograd import Function\nfrom ._ext import dcn as _backend\n\n"
            "class DCNFunction(Function):\n    def forward(self, x):\n        return _backend.dcn_forward(x)\n")
FFI_TEST = ("import torch\nfrom dcn.func import DCNFunction\n\nx = torch.nn.Conv2d(2, 2, 3).cuda()\nprint(x)\n")


def test_a_torch_ffi_extension_built_only_with_cuda_makes_its_importers_cuda_only(tmp_path, monkeypatch):
    """A `torch.utils.ffi` build (PyTorch <= 0.4) whose script raises without CUDA, or has no C
    source without it (`sources = []`), makes a CUDA-only `_ext.dcn`; a module importing it
    (`from ._ext import dcn`) cannot load without CUDA, nor can a script importing that module.
    Trap: a build with a C source and no raise has a CPU path: the finding stays."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, {"dcn/__init__.py": "", "dcn/build.py": FFI_BUILD, "dcn/func.py": FFI_FUNC, "check.py": FFI_TEST})
    assert lint(tmp_path, monkeypatch) == []
    no_cpu = FFI_BUILD.replace("sources = ['src/dcn.c']", "sources = []").replace(
        "else:\n    raise ValueError('CUDA is not available')\n", "")
    write(tmp_path, {"dcn/build.py": no_cpu})
    assert lint(tmp_path, monkeypatch) == []
    write(tmp_path, {"dcn/build.py": FFI_BUILD.replace("else:\n    raise ValueError('CUDA is not available')\n", "")})
    assert lint(tmp_path, monkeypatch) == [("check.py", 4, "DL002")]


PREPARE = ("from pathlib import Path\nimport torch\n\ndef generate_prompt(example):\n    return example['text']\n\n"
           "def prepare(out_dir: Path = Path('data/alpaca')):\n"
           "    train_set = [torch.tensor([1, 2, 3])]\n    torch.save(train_set, out_dir / 'train.pt')\n\n"
           "if __name__ == '__main__':\n    prepare()\n")
FINETUNE = ("import os\nimport torch\nfrom scripts.prepare import generate_prompt\n\ndef load_datasets(data_dir):\n"
            "    return torch.load(os.path.join(data_dir, 'train.pt'))\n\n"
            "if __name__ == '__main__':\n    print(len(load_datasets('data/alpaca')))\n")


def test_a_pathlib_save_names_its_file_for_the_loads_of_other_scripts(tmp_path, monkeypatch):
    """lit-llama's shape: `prepare_alpaca.py` writes host data with `torch.save(train_set,
    out_dir / "train.pt")` (a pathlib join) and the finetuning script loads
    `os.path.join(data_dir, "train.pt")`, and imports its prompt helper from it: the file holds
    host tensors. Trap: the same data moved to the GPU before the save keeps the finding."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, {"scripts/prepare.py": PREPARE, "finetune.py": FINETUNE})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == []
    write(tmp_path, {"scripts/prepare.py": PREPARE.replace("torch.tensor([1, 2, 3])]", "torch.tensor([1, 2, 3]).cuda()]")})
    assert ("finetune.py", 6, "DL005") in lint(tmp_path, monkeypatch)


EXTRACT = ("import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--dir')\n"
           "args = parser.parse_args()\nemb = {}\nfor utt in ['a', 'b']:\n    emb[utt] = [0.1, 0.2]\n"
           "torch.save(emb, SAVE)\n")
MAKE_LIST = ("import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--src')\n"
             "args = parser.parse_args()\nemb = torch.load(LOAD)\nprint(len(emb))\n")


@pytest.mark.parametrize("save, load", [
    ("'{}/utt2embedding.pt'.format(args.dir)", "'{}/utt2embedding.pt'.format(args.src)"),
    ("'%s/emb_%s.pth' % (args.dir, 'x')", "args.src + 'emb_%s.pth' % 'x'"),
    ("f'{args.dir}/emb_{1}.pth'", "'%s/emb_%d.pth' % (args.src, 1)"),
    ("f'{args.dir}/emb_{1}.pth'", "args.src + '/emb_1.pth'"),
])
def test_a_formatted_file_name_links_a_host_save_to_its_loads(tmp_path, monkeypatch, save, load):
    """CosyVoice's shape: one tool writes `'{}/utt2embedding.pt'.format(args.dir)` from host
    data (a dict of Python lists), a sibling loads `'{}/utt2embedding.pt'.format(args.src_dir)`.
    The formatted names match as templates, their fields as wildcards. Trap: the same tool
    saving a model moved to the GPU keeps the finding."""
    write(tmp_path, {"extract.py": EXTRACT.replace("SAVE", save), "make_list.py": MAKE_LIST.replace("LOAD", load)})
    assert [f for f in lint(tmp_path, monkeypatch, "make_list.py") if f[2] == "DL005"] == []
    gpu = EXTRACT.replace("SAVE", save).replace("emb = {}\n", "emb = {}\nnet = torch.nn.Linear(2, 2).cuda()\n")
    gpu = gpu.replace("torch.save(emb,", "torch.save(net.state_dict(),")
    write(tmp_path, {"extract.py": gpu})
    assert ("make_list.py", 7, "DL005") in lint(tmp_path, monkeypatch, "make_list.py")


SAMPLES = ("import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--out')\n"
           "args = parser.parse_args()\nnet = torch.nn.Linear(2, 2).cuda()\n\n\ndef main():\n"
           "    clean_tot, adv_tot = 0, 0\n    for i, x in enumerate([torch.ones(2, 2)] * 3):\n"
           "        x = x.cuda()\n        adv = net(x)\n        if i == 0:\n            clean_tot = x.clone().data.cpu()\n"
           "            adv_tot = ADV\n        else:\n            clean_tot = torch.cat((clean_tot, x.clone().data.cpu()), 0)\n"
           "            adv_tot = torch.cat((adv_tot, ADV), 0)\n"
           "    clean_tot = torch.index_select(clean_tot, 0, torch.tensor([0, 1]))\n"
           "    torch.save(clean_tot, '%s/clean_data_%s.pth' % (args.out, 'x'))\n"
           "    torch.save(adv_tot, '%s/adv_data_%s.pth' % (args.out, 'x'))\n\n\nmain()\n")
DETECT = ("import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--out')\n"
          "args = parser.parse_args()\nclean = torch.load(args.out + 'clean_data_%s.pth' % 'x')\n"
          "adv = torch.load(args.out + 'adv_data_%s.pth' % 'x')\nprint(clean.shape, adv.shape)\n")


def test_a_tensor_accumulated_from_host_copies_is_saved_host_data(tmp_path, monkeypatch):
    """deep_Mahalanobis_detector's shape: `tot = 0`, then `tot = x.cpu()` / `tot = torch.cat((tot,
    x.cpu()), 0)`, then `tot = torch.index_select(tot, 0, idx)`, saved under a template another
    script loads: every binding keeps host data, so the file holds host tensors. Trap: the one
    accumulated from device outputs (`adv = net(x)` on the GPU) keeps its load's finding."""
    write(tmp_path, {"samples.py": SAMPLES.replace("ADV", "adv.data"), "detect.py": DETECT})
    found = [f for f in lint(tmp_path, monkeypatch, "detect.py") if f[2] == "DL005"]
    assert ("detect.py", 7, "DL005") not in found and ("detect.py", 8, "DL005") in found
    write(tmp_path, {"samples.py": SAMPLES.replace("ADV", "adv.data.cpu()")})
    assert [f for f in lint(tmp_path, monkeypatch, "detect.py") if f[2] == "DL005"] == []


CONVERT = ("import sys\nimport torch\nfrom pathlib import Path\n\n\n"
           "def convert(sd, dtype: torch.dtype = torch.float32):\n"
           "    return {k.replace('layers', 'h'): v.to(dtype) for k, v in sd.items()}\n\n\n"
           "def main(src: Path, out: Path):\n    sd = torch.load(src, map_location='cpu')\n"
           "    torch.save(convert(sd), out / 'model.pth')\n\n\n"
           "if __name__ == '__main__':\n    main(Path(sys.argv[1]), Path(sys.argv[2]))\n")
GENERATE_DEFAULT = ("import torch\nfrom pathlib import Path\n\n\n"
            "def main(checkpoint_path: Path = Path('checkpoints/model.pth')):\n"
            "    model = torch.nn.Linear(2, 2).cuda()\n"
            "    model.load_state_dict(torch.load(str(checkpoint_path)))\n\n\nmain()\n")


def test_a_conversion_scripts_save_is_host_data_where_a_load_names_it_by_default(tmp_path, monkeypatch):
    """gpt-fast's shape: `scripts/convert.py` reads with `map_location="cpu"`, casts with
    `.to(dtype)` (a dtype parameter places nothing) and saves `model.pth`; `generate.py`, in
    another directory, loads its `checkpoint_path` parameter, whose default names that file.
    Trap: a converter that moves the weights to the GPU writes device tensors."""
    write(tmp_path, {"scripts/convert.py": CONVERT, "generate.py": GENERATE_DEFAULT})
    assert [f for f in lint(tmp_path, monkeypatch, "generate.py") if f[2] == "DL005"] == []
    write(tmp_path, {"scripts/convert.py": CONVERT.replace("v.to(dtype)", "v.to(dtype).cuda()")})
    assert ("generate.py", 7, "DL005") in lint(tmp_path, monkeypatch, "generate.py")


def test_a_template_that_spells_too_little_of_the_name_links_nothing(tmp_path, monkeypatch):
    """`'%s.pth' % name` could be any checkpoint of the project: a host save under it says
    nothing about a load of `'{}.pth'.format(other)`."""
    from devlint.project import name_template, same_file

    assert name_template("%s.pth", "percent") is None and name_template("{}_{}.pt", "format") is None
    assert name_template("{}/utt2embedding.pt", "format") == "utt2embedding.pt"
    assert name_template("%s/clean_%s_%d.pth", "percent") == "clean_*_*.pth"
    assert same_file("clean_*_*.pth", "clean_a_1.pth") and not same_file("clean_*_*.pth", "noisy_a_1.pth")
    write(tmp_path, {"extract.py": EXTRACT.replace("SAVE", "'%s.pth' % args.dir"),
                     "other.py": "import torch\nnet = torch.nn.Linear(2, 2).cuda()\ntorch.save(net, 'model.pth')\n",
                     "make_list.py": MAKE_LIST.replace("LOAD", "'{}.pth'.format(args.src)")})
    assert ("make_list.py", 7, "DL005") in lint(tmp_path, monkeypatch, "make_list.py")


def test_an_import_in_try_is_mandatory_only_when_every_handler_raises():
    from devlint.project import _top_imports

    src = (b"import torch\ntry:\n    import pkg._ext as _ext\nexcept ImportError:\n    raise ImportError('build it')\n"
           b"except OSError:\n    raise\n\nx = 1\n")
    assert ["pkg._ext", 0, []] in _top_imports(src)
    fallback = src.replace(b"except OSError:\n    raise\n", b"except OSError:\n    _ext = None\n")
    assert ["pkg._ext", 0, []] not in _top_imports(fallback)


# ---- a function the project uses only where CUDA is required anyway (cuda_callers) ----------
CORE = ("import torch\n\n\ndef prepare_batch(x, y):\n    return x.cuda(), y.cuda()\n\n\n"
        "def unused(x):\n    return x.cuda()\n")
MODELS = ("import torch\nfrom torch import nn\n\n\nclass Inner(nn.Module):\n    def __init__(self):\n"
          "        super().__init__()\n        self.fc = nn.Linear(2, 2).cuda()\n\n\n"
          "class Outer(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
          "        self.inner = Inner()\n")
NEEDS_GPU = ("import torch\nfrom fewshot.core import prepare_batch\nfrom fewshot.models import Outer\n\n"
             "assert torch.cuda.is_available(), 'this experiment needs a GPU'\n\n"
             "def step(x, y):\n    return prepare_batch(x, y)\n\n"
             "model = Outer()\nprint(model, step(torch.ones(2), torch.ones(2)))\n")
CPU_DEMO = ("import torch\nfrom fewshot.core import prepare_batch\n\nprint(prepare_batch(torch.ones(2), torch.ones(2)))\n")


def cuda_callers_project(tmp_path, monkeypatch, cache=False, **extra):
    files = {"pyproject.toml": "", "fewshot/__init__.py": "", "fewshot/core.py": CORE,
             "fewshot/models.py": MODELS, "experiments/proto.py": NEEDS_GPU}
    files.update(extra)
    write(tmp_path, files)
    return [f for f in lint(tmp_path, monkeypatch, cache=cache) if f[0].startswith("fewshot/") and f[2] == "DL002"]


def test_a_helper_used_only_by_scripts_that_need_cuda_runs_only_on_gpus(tmp_path, monkeypatch):
    """`prepare_batch` (another directory) is called only by an experiment that asserts CUDA
    first thing, through a function of its own; `Inner` is built only by `Outer`, which only
    that experiment builds. A helper never used at all keeps its finding."""
    assert cuda_callers_project(tmp_path, monkeypatch) == [("fewshot/core.py", 9, "DL002")]


NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": ["from fewshot.core import prepare_batch\n", "prepare_batch(a, b)\n"]}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.parametrize("extra", [
    {"demo.py": CPU_DEMO},  # a script that runs anywhere calls it too
    {"demo.ipynb": NOTEBOOK},  # a notebook: runs where its reader runs it
    {"fewshot/__init__.py": "from .core import prepare_batch\n"},  # an export: its users are not all here
    {"fewshot/core.py": CORE + "\n__all__ = ['prepare_batch']\n"},  # its public interface
    {"experiments/proto.py": NEEDS_GPU.replace("assert torch.cuda.is_available(), 'this experiment needs a GPU'\n", "")},
], ids=["cpu-script", "notebook", "package-export", "__all__", "no-assert"])
def test_a_helper_with_one_use_that_may_run_without_cuda_keeps_its_finding(tmp_path, monkeypatch, extra):
    assert ("fewshot/core.py", 5, "DL002") in cuda_callers_project(tmp_path, monkeypatch, **extra)


def test_cache_follows_a_new_use_of_a_helper_in_another_file(tmp_path, monkeypatch):
    assert ("fewshot/core.py", 5, "DL002") not in cuda_callers_project(tmp_path, monkeypatch, cache=True)
    write(tmp_path, {"experiments/demo.py": CPU_DEMO})
    assert ("fewshot/core.py", 5, "DL002") in lint(tmp_path, monkeypatch, cache=True)
    (tmp_path / "experiments" / "demo.py").unlink()
    assert ("fewshot/core.py", 5, "DL002") not in lint(tmp_path, monkeypatch, cache=True)


GUARDED_DEMO = ("import torch\nfrom fewshot.core import prepare_batch\n\nx = torch.ones(2)\n"
                "if torch.cuda.is_available():\n    x, _ = prepare_batch(x, x)\nprint(x)\n")


def test_a_helper_called_only_where_cuda_is_usable_runs_only_on_gpus(tmp_path, monkeypatch):
    """A script that runs anywhere but calls the helper only under `if torch.cuda.is_available():`."""
    assert ("fewshot/core.py", 5, "DL002") not in cuda_callers_project(tmp_path, monkeypatch, **{"demo.py": GUARDED_DEMO})
    inverted = GUARDED_DEMO.replace("if torch.cuda", "if not torch.cuda")
    assert ("fewshot/core.py", 5, "DL002") in cuda_callers_project(tmp_path, monkeypatch, **{"demo.py": inverted})


UTILS_SAVES = ("import torch\n\n\ndef save_checkpoint(model, path):\n    torch.save({'model': model.state_dict()}, path)\n\n\n"
               "def load_checkpoint(path):\n    return torch.load(path)\n")
COMPRESS = ("import sys\nimport torch\n\nif __name__ == '__main__':\n    sd = torch.load(sys.argv[1], map_location='cpu')\n"
            "    torch.save({'model': sd['model']}, sys.argv[2])\n")


def test_a_host_copy_beside_the_files_own_device_checkpoints_is_not_all_the_program_saves(tmp_path, monkeypatch):
    """A sibling script re-saves checkpoints it loaded onto the CPU, but the module's own
    `save_checkpoint` writes whatever device the model is on: its loads keep the finding."""
    write(tmp_path, {"utils.py": UTILS_SAVES, "compress.py": COMPRESS})
    assert ("utils.py", 9, "DL005") in lint(tmp_path, monkeypatch, "utils.py")
    write(tmp_path, {"utils.py": UTILS_SAVES.replace("model.state_dict()", "model.cpu().state_dict()")})
    assert ("utils.py", 9, "DL005") not in lint(tmp_path, monkeypatch, "utils.py")


def test_a_class_built_only_by_a_class_the_gpu_script_builds_keeps_its_finding_once_the_script_runs_anywhere(tmp_path, monkeypatch):
    no_assert = NEEDS_GPU.replace("assert torch.cuda.is_available(), 'this experiment needs a GPU'\n", "")
    found = cuda_callers_project(tmp_path, monkeypatch, **{"experiments/proto.py": no_assert})
    assert ("fewshot/models.py", 8, "DL002") in found


IS_DISTRIBUTED = ("import torch.distributed as torch_dist\n\n\ndef is_distributed():\n"
                "    return torch_dist.is_initialized()\n")
REDUCE = ("import torch\nimport utils.distributed as dist\n\n\ndef validate(matrix):\n"
          "    if dist.is_distributed():\n        matrix = torch.from_numpy(matrix).cuda()\n    return matrix\n")
NCCL_TRAIN = ("import sys\nimport torch\nfrom core.function import validate\n\nif __name__ == '__main__':\n"
          "    if len(sys.argv) > 1:\n        torch.distributed.init_process_group(backend='nccl', init_method='env://')\n"
          "    print(validate(None))\n")


@pytest.mark.parametrize("backend,reported", [("nccl", False), ("gloo", True)])
def test_a_process_group_check_in_a_project_whose_only_groups_are_nccl_is_a_gpu_guard(tmp_path, monkeypatch, backend, reported):
    """`if dist.is_distributed():` (a project helper, through a module alias) in a module no script
    beside it imports: the project's one launcher (another directory) starts only NCCL groups."""
    write(tmp_path, {"pyproject.toml": "", "utils/__init__.py": "", "utils/distributed.py": IS_DISTRIBUTED,
                     "core/__init__.py": "", "core/function.py": REDUCE,
                     "tools/train.py": NCCL_TRAIN.replace("'nccl'", repr(backend))})
    assert (("core/function.py", 7, "DL002") in lint(tmp_path, monkeypatch)) is reported


def test_a_using_script_too_deep_for_the_ast_keeps_the_texts_answer(tmp_path, monkeypatch):
    """A pathologically deep expression in a script that uses the helper: no crash, the finding stays."""
    deep = GUARDED_DEMO + "y = " + " + ".join(["1"] * 3000) + "\nprint(prepare_batch(x, x))\n"
    assert ("fewshot/core.py", 5, "DL002") in cuda_callers_project(tmp_path, monkeypatch, **{"demo.py": deep})


# a switch another module of the project sets once in the code (`USE_CUDA = True`) is no one's
# choice: the branch it selects always runs
SWITCH_USER = ("import torch\nfrom constants import *\n\ndef batch(x):\n    if USE_CUDA:\n"
               "        x = x.cuda()\n    return x\n\nif __name__ == '__main__':\n    print(batch(torch.ones(2)))\n")
SWITCH_NAMED = SWITCH_USER.replace("from constants import *", "from constants import USE_CUDA as GPU").replace(
    "if USE_CUDA:", "if GPU:")


def test_a_switch_another_module_sets_in_code_guards_nothing(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "constants.py": "USE_CUDA = True\nHIDDEN = 100\n",
                     "train.py": SWITCH_USER, "named.py": SWITCH_NAMED})
    found = [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL002"]
    assert found == [("named.py", 6, "DL002"), ("train.py", 6, "DL002")]


def test_a_switch_the_program_may_change_keeps_guarding(tmp_path, monkeypatch):
    # set from an availability check, rebound after its literal, bound by the file itself, or
    # declared `global` by a function that may change it: the branch is somebody's choice
    for constants in ("import torch\nUSE_CUDA = torch.cuda.is_available()\n",
                      "import torch\nUSE_CUDA = True\nif not torch.cuda.is_available():\n    USE_CUDA = False\n",
                      "USE_CUDA = True\ndef cpu_only():\n    global USE_CUDA\n    USE_CUDA = False\n"):
        write(tmp_path, {"setup.py": "", "constants.py": constants, "train.py": SWITCH_USER})
        assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL002"] == [], constants
    write(tmp_path, {"constants.py": "USE_CUDA = True\n",
                     "train.py": SWITCH_USER.replace("def batch", "USE_CUDA = torch.cuda.is_available()\n\ndef batch")})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL002"] == []


def test_cache_follows_an_edit_of_a_switch_in_another_module(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "constants.py": "USE_CUDA = True\n", "train.py": SWITCH_USER})
    assert ("train.py", 6, "DL002") in lint(tmp_path, monkeypatch, "train.py", cache=True)
    write(tmp_path, {"constants.py": "import torch\nUSE_CUDA = torch.cuda.is_available()\n"})
    assert [f for f in lint(tmp_path, monkeypatch, "train.py", cache=True) if f[2] == "DL002"] == []


# a project helper that starts its process group with the backend its caller hands it
BACKEND_HELPER = ("import torch.distributed as dist\n\ndef setup(rank, world_size, backend=\"gloo\"):\n"
                  "    dist.init_process_group(backend, rank=rank, world_size=world_size)\n")
NCCL_BY_HELPER = ("import torch\nfrom basics import setup\n\ndef train(rank, ws):\n    setup(rank, ws, \"nccl\")\n"
                  "    torch.cuda.synchronize()\n\nif __name__ == '__main__':\n    train(0, 1)\n")


def test_a_helper_handed_nccl_makes_the_rest_of_the_block_cuda_only(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "basics.py": BACKEND_HELPER, "train.py": NCCL_BY_HELPER,
                     "kw.py": NCCL_BY_HELPER.replace("from basics import setup", "from basics import setup as init")
                     .replace('setup(rank, ws, "nccl")', 'init(rank, ws, backend="nccl")')})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL004"] == []


def test_a_helper_left_on_its_gloo_default_or_rebinding_its_backend_keeps_the_finding(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "basics.py": BACKEND_HELPER,
                     "train.py": NCCL_BY_HELPER.replace('setup(rank, ws, "nccl")', "setup(rank, ws)")})
    assert ("train.py", 6, "DL004") in lint(tmp_path, monkeypatch)
    write(tmp_path, {"basics.py": BACKEND_HELPER.replace("    dist.init", "    backend = \"gloo\"\n    dist.init"),
                     "train.py": NCCL_BY_HELPER})
    assert ("train.py", 6, "DL004") in lint(tmp_path, monkeypatch)


def test_absolute_imports_resolve_from_a_sub_project_root(tmp_path, monkeypatch):
    # a mono-repository (a course's assignments) configured at its top: `a2/` is a project of its
    # own, and its files import `from src.ddp.basics import setup` from there
    zero = NCCL_BY_HELPER.replace("from basics import setup", "from src.ddp.basics import setup")
    write(tmp_path, {"pyproject.toml": "[tool.devlint]\n", "a2/pyproject.toml": "[project]\nname = 'a2'\n",
                     "a2/src/ddp/basics.py": BACKEND_HELPER, "a2/src/ddp/zero.py": zero,
                     # without a project file of its own `a3/` is a plain directory: nothing resolves
                     "a3/src/ddp/basics.py": BACKEND_HELPER, "a3/src/ddp/zero.py": zero})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL004"] == [("a3/src/ddp/zero.py", 6, "DL004")]


# a project factory that wraps the model in DataParallel only when GPUs were asked for: only that
# path has `.module`, so code reading `model.module` is on it
WRAPPING_FACTORY = ("import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.enc = nn.Linear(4, 2)\n\n"
                    "def create_model(opt):\n    model = Model()\n"
                    "    if opt.is_train and len(opt.gpu_ids) and not opt.fp16:\n"
                    "        model = torch.nn.DataParallel(model, device_ids=opt.gpu_ids)\n    return model\n")
READS_MODULE = ("import torch\nfrom models import create_model\nfrom options import opt\n\n"
                "model = create_model(opt)\nfor batch in [torch.ones(1, 4)]:\n"
                "    feat = model.module.enc(batch.cuda())\n"
                "model.module.enc.load_state_dict({})\nhead = torch.nn.Linear(2, 1).cuda()\n")


def test_code_reading_module_of_a_model_wrapped_only_for_gpus_is_on_the_gpu_path(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "models.py": WRAPPING_FACTORY, "options.py": "opt = None\n",
                     "features.py": READS_MODULE})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "features.py"] == []


def test_a_wrap_on_every_path_or_a_model_bound_elsewhere_too_keeps_the_finding(tmp_path, monkeypatch):
    # DataParallel on a CPU-only machine still wraps (and `.module` exists): no GPU path there
    always = WRAPPING_FACTORY.replace("    if opt.is_train and len(opt.gpu_ids) and not opt.fp16:\n    ", "")
    write(tmp_path, {"setup.py": "", "models.py": always, "options.py": "opt = None\n", "features.py": READS_MODULE})
    found = lint(tmp_path, monkeypatch)
    assert ("features.py", 7, "DL002") in found and ("features.py", 9, "DL002") in found
    # the wrap asks the user's fp16 switch, not a GPU: no GPU path either
    write(tmp_path, {"models.py": WRAPPING_FACTORY.replace("opt.is_train and len(opt.gpu_ids) and not opt.fp16", "opt.fp16")})
    assert ("features.py", 7, "DL002") in lint(tmp_path, monkeypatch)
    # `model` is also bound to a wrapper made here on any machine
    write(tmp_path, {"models.py": WRAPPING_FACTORY,
                     "features.py": READS_MODULE.replace("model = create_model(opt)\n", "model = create_model(opt)\n"
                                                         "if opt.multi:\n    model = torch.nn.DataParallel(model)\n")})
    assert ("features.py", 9, "DL002") in lint(tmp_path, monkeypatch)


def test_a_factory_of_the_file_itself_that_wraps_for_gpus(tmp_path, monkeypatch):
    own = WRAPPING_FACTORY + "\nclass O:\n    gpu_ids = [0]\n    is_train = True\n    fp16 = False\n\n" + \
        READS_MODULE.split("\n\n", 1)[1].replace("(opt)", "(O)")
    write(tmp_path, {"setup.py": "", "run.py": own})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL002"] == []


# a method of the model class that another script calls only through the wrapper's `.module`
CALLS_METHOD = ("import torch\nfrom models import create_model\nfrom options import opt\n\n"
                "model = create_model(opt)\nfor batch in [torch.ones(1, 4)]:\n"
                "    feat = model.module.encode(batch)\n")


def _wrapped_method_project(tmp_path, models=None, caller=None, extra=None):
    models = models or WRAPPING_FACTORY.replace("\n\ndef create_model", "\n    def encode(self, image):\n"
                                                "        return self.enc(image.cuda())\n\ndef create_model")
    files = {"setup.py": "", "models.py": models, "options.py": "opt = None\n", "encode.py": caller or CALLS_METHOD}
    files.update(extra or {})
    write(tmp_path, files)


def test_a_method_called_only_through_a_gpu_wrappers_module_runs_on_the_gpu_path(tmp_path, monkeypatch):
    _wrapped_method_project(tmp_path)
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "models.py"] == []


def test_a_method_called_any_other_way_keeps_its_finding(tmp_path, monkeypatch):
    # a plain call on the unwrapped model: the method runs on the CPU path too
    _wrapped_method_project(tmp_path, caller=CALLS_METHOD.replace("model.module.encode", "Model().encode"))
    assert ("models.py", 9, "DL002") in lint(tmp_path, monkeypatch)
    # `.module` of a model this script also binds to something else
    _wrapped_method_project(tmp_path, caller=CALLS_METHOD + "model = torch.nn.DataParallel(Model())\n"
                            "model.module.encode(torch.ones(1, 4))\n")
    assert ("models.py", 9, "DL002") in lint(tmp_path, monkeypatch)
    # the factory wraps on every path: `.module` exists on a CPU-only machine too
    always = WRAPPING_FACTORY.replace("    if opt.is_train and len(opt.gpu_ids) and not opt.fp16:\n    ", "")
    _wrapped_method_project(tmp_path, models=always.replace(
        "\n\ndef create_model", "\n    def encode(self, image):\n        return self.enc(image.cuda())\n\ndef create_model"),
        caller=CALLS_METHOD)
    assert ("models.py", 9, "DL002") in lint(tmp_path, monkeypatch)
    # a notebook names it: its reader may call it on any machine
    _wrapped_method_project(tmp_path, extra={"demo.ipynb": json.dumps(
        {"cells": [{"cell_type": "code", "metadata": {}, "source": ["m.encode(x)\n"], "outputs": [],
                    "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})})
    assert ("models.py", 9, "DL002") in lint(tmp_path, monkeypatch)


def test_cache_follows_an_edit_of_the_script_calling_the_method(tmp_path, monkeypatch):
    _wrapped_method_project(tmp_path)
    assert lint(tmp_path, monkeypatch, "models.py", cache=True) == []
    write(tmp_path, {"encode.py": CALLS_METHOD.replace("model.module.encode", "Model().encode")})
    assert ("models.py", 9, "DL002") in lint(tmp_path, monkeypatch, "models.py", cache=True)


# an evaluation module that moves every row to the host itself before saving `gt.pt`, and a
# script elsewhere in the project reading it back
SAVES_HOST_ROWS = ("import torch\nfrom typing import List\n\n\ndef evaluate(model, loader, save_dir, device):\n"
                   "    gt_path = save_dir / \"gt.pt\"\n    if gt_path.exists():\n        return torch.load(gt_path)\n"
                   "    rows: List[torch.Tensor] = []\n    for x in loader:\n"
                   "        rows.append(model(x.to(device)).cpu())\n"
                   "    gt = torch.cat(rows, dim=0)\n    torch.save(gt, gt_path)\n    return gt\n")
READS_GT = "import sys\nimport torch\n\ngt = torch.load(sys.argv[1] + \"/gt.pt\")\nprint(gt.shape)\n"


def test_a_data_file_the_project_moves_to_the_host_before_saving(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "pkg/__init__.py": "", "pkg/evaluation.py": SAVES_HOST_ROWS,
                     "scripts/export.py": READS_GT})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "scripts/export.py"] == []


def test_a_data_file_saved_from_the_device_anywhere_keeps_the_finding(tmp_path, monkeypatch):
    # one row is appended as it is, on the device
    write(tmp_path, {"setup.py": "", "pkg/__init__.py": "",
                     "pkg/evaluation.py": SAVES_HOST_ROWS.replace("model(x.to(device)).cpu()", "model(x.to(device))"),
                     "scripts/export.py": READS_GT})
    found = [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"]
    assert ("scripts/export.py", 4, "DL005") in found and ("pkg/evaluation.py", 8, "DL005") in found
    # another module saves a `gt.pt` of its own from the device
    write(tmp_path, {"pkg/evaluation.py": SAVES_HOST_ROWS,
                     "pkg/other.py": "import torch\n\ndef dump(x):\n    torch.save(x.cuda(), \"out/gt.pt\")\n"})
    assert ("scripts/export.py", 4, "DL005") in lint(tmp_path, monkeypatch)


def test_summary_names_functions_that_wrap_only_for_gpus():
    src = (WRAPPING_FACTORY + "\ndef init_net(net, gpu_ids=[]):\n    if len(gpu_ids) > 0:\n"
           "        assert torch.cuda.is_available()\n        net.to(gpu_ids[0])\n"
           "        net = torch.nn.DataParallel(net, gpu_ids)\n    return net\n\n"
           "def everywhere(net):\n    net = nn.DataParallel(net)\n    return net\n\n"
           "def not_returned(net, args):\n    if args.cuda:\n        wrapped = nn.DataParallel(net)\n    return net\n")
    assert summarize(src.encode()).gpu_wrappers == ["create_model", "init_net"]


# a stateless project Module read off its module (`decode.Decoder(...)`, a registry lookup
# `decode.__dict__["Decoder"](...)`): `.cuda()` on it moves nothing
STATELESS_DECODER = ("import torch\nfrom torch import nn\n\nclass Decoder(nn.Module):\n"
                     "    def __init__(self, strides=(8, 16, 32), topn=100):\n        super().__init__()\n"
                     "        self.strides = strides\n        self.topn = topn\n\n"
                     "    def forward(self, x):\n        return x[:, :self.topn] * self.strides[0]\n")
BUILDS_DECODER = ("import torch\nfrom pkg import decode\n\n"
                  "a = decode.__dict__['Decoder'](**{'strides': (8, 16, 32)}).cuda()\n"
                  "b = decode.Decoder(topn=50).cuda()\n")


def test_cuda_on_a_stateless_module_read_off_a_project_module_moves_nothing(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "pkg/__init__.py": "", "pkg/decode.py": STATELESS_DECODER,
                     "configs/cfg.py": BUILDS_DECODER})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL002"] == []


def test_a_decoder_holding_what_its_caller_hands_it_keeps_the_finding(tmp_path, monkeypatch):
    # no literal default: `strides` may be a Module list the caller built
    held = STATELESS_DECODER.replace("strides=(8, 16, 32)", "strides")
    write(tmp_path, {"setup.py": "", "pkg/__init__.py": "", "pkg/decode.py": held, "configs/cfg.py": BUILDS_DECODER})
    found = lint(tmp_path, monkeypatch)
    assert ("configs/cfg.py", 4, "DL002") in found and ("configs/cfg.py", 5, "DL002") in found


# a data file shipped in the tree: its storages' locations are in the file, read without torch
SHIPPED_LOADER = ("import torch\n\ndef check(i):\n    y = torch.load('./sanity_data/Ybar_t.pkl')\n"
                  "    s = torch.load(f'./sanity_data/step_{i}.pkl')\n    return y, s\n")


def _cpu_blob(path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torch.ones(2, 3), str(path))


def _cuda_blob(path: Path) -> None:
    """A zip checkpoint whose pickle places a storage on ``cuda:0`` (as a GPU run writes it)."""
    import zipfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq\x01"
                                       b"ctorch\nFloatStorage\nq\x02X\x01\x00\x00\x000q\x03X\x06\x00\x00\x00cuda:0q\x04K\x06tq\x05.")
        z.writestr("archive/version", b"3\n")


def test_a_checkpoint_shipped_in_the_tree_with_cpu_storages_loads_anywhere(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "a3/sanity_check.py": SHIPPED_LOADER})
    for name in ("Ybar_t.pkl", "step_0.pkl", "step_1.pkl"):
        _cpu_blob(tmp_path / "a3" / "sanity_data" / name)
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == []


def test_a_shipped_file_with_a_cuda_storage_or_no_torch_file_keeps_the_finding(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "a3/sanity_check.py": SHIPPED_LOADER})
    _cpu_blob(tmp_path / "a3" / "sanity_data" / "step_0.pkl")
    _cuda_blob(tmp_path / "a3" / "sanity_data" / "step_1.pkl")  # one of the template's files is a GPU one
    # a Git LFS pointer: the bytes are not in the checkout
    (tmp_path / "a3" / "sanity_data" / "Ybar_t.pkl").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 808\n")
    assert sorted(f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005") == [
        ("a3/sanity_check.py", 4, "DL005"), ("a3/sanity_check.py", 5, "DL005")]


def test_cache_follows_a_shipped_file_replaced_by_a_gpu_one(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "a3/sanity_check.py": SHIPPED_LOADER.replace(
        "    s = torch.load(f'./sanity_data/step_{i}.pkl')\n", "    s = None\n")})
    blob = tmp_path / "a3" / "sanity_data" / "Ybar_t.pkl"
    _cpu_blob(blob)
    assert lint(tmp_path, monkeypatch, cache=True) == []
    _cuda_blob(blob)
    assert lint(tmp_path, monkeypatch, cache=True) == [("a3/sanity_check.py", 4, "DL005")]


# a training script that places nothing: its best model is a fresh instance of its own class, saved
# under one of two names chosen by an option; a plotting script beside it loads both (fresh19)
TRAINS_ON_HOST = ("import argparse\nimport torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
                  "    def __init__(self, n):\n        super().__init__()\n        self.fc = nn.Linear(n, 1)\n\n"
                  "    def forward(self, x):\n        return self.fc(x)\n\n\n"
                  "def train(args, data):\n    model = Net(4)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                  "    best = None\n    for epoch in range(3):\n        loss = model(data).sum()\n"
                  "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
                  "        best = Net(4)\n        best.load_state_dict(model.state_dict())\n"
                  "    if args.quadratic:\n        output_file = 'best_quadratic.pth'\n"
                  "    else:\n        output_file = 'best_linear.pth'\n"
                  "    torch.save(best.state_dict(), output_file)\n\n\n"
                  "if __name__ == '__main__':\n    train(argparse.ArgumentParser().parse_args(), torch.randn(8, 4))\n")
PLOTS = ("import torch\nfrom train import Net\n\nq = Net(4)\nq.load_state_dict(torch.load('best_quadratic.pth'))\n"
         "l = Net(4)\nl.load_state_dict(torch.load('best_linear.pth'))\n")


def test_a_fresh_model_of_a_script_that_places_nothing_is_host_data_under_each_name(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "train.py": TRAINS_ON_HOST, "plot.py": PLOTS})
    assert [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"] == []


def test_the_same_script_moving_its_best_model_to_the_gpu_keeps_the_findings(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": "", "train.py": TRAINS_ON_HOST.replace(
        "        best = Net(4)\n", "        best = Net(4).to('cuda' if torch.cuda.is_available() else 'cpu')\n"),
        "plot.py": PLOTS})
    found = [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"]
    assert ("plot.py", 5, "DL005") in found and ("plot.py", 7, "DL005") in found


def test_a_model_handed_in_by_the_caller_is_not_a_fresh_one(tmp_path, monkeypatch):
    src = TRAINS_ON_HOST.replace("def train(args, data):\n", "def train(args, data, best=None):\n").replace(
        "        best = Net(4)\n        best.load_state_dict", "        best.load_state_dict")
    write(tmp_path, {"setup.py": "", "train.py": src, "plot.py": PLOTS})
    found = [f for f in lint(tmp_path, monkeypatch) if f[2] == "DL005"]
    assert ("plot.py", 5, "DL005") in found


def test_a_fresh_model_stays_host_data_in_a_script_that_also_loads(tmp_path, monkeypatch):
    # the script reads a checkpoint too (what it re-saves could be the loaded file's), but what it
    # saves is a new instance of its own class, filled by `load_state_dict` (a copy into host tensors)
    src = TRAINS_ON_HOST.replace("    model = Net(4)\n",
                                 "    model = Net(4)\n    model.load_state_dict(torch.load(args.init))\n")
    write(tmp_path, {"setup.py": "", "train.py": src, "plot.py": PLOTS})
    assert [f for f in lint(tmp_path, monkeypatch) if f[0] == "plot.py"] == []
    # ... while a whole module unpickled from a file is whatever that file held
    write(tmp_path, {"train.py": src.replace("        best = Net(4)\n        best.load_state_dict(model.state_dict())\n",
                                             "        best = torch.load(args.init)\n")})
    assert ("plot.py", 5, "DL005") in lint(tmp_path, monkeypatch)


# a C++ extension (`CppExtension`) whose source refuses anything but CUDA tensors: no CPU path,
# so the script that feeds it runs only with a GPU (fresh19)
LLTM_SETUP = ("from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CppExtension\n"
              "setup(name='lltm', ext_modules=[CppExtension('lltm', ['lltm.cpp'])],\n"
              "      cmdclass={'build_ext': BuildExtension})\n")
LLTM_CPP = ("#include <torch/extension.h>\n"
            "#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x \" must be a CUDA tensor\")\n"
            "std::vector<torch::Tensor> lltm_cuda_forward(torch::Tensor input);\n"
            "std::vector<torch::Tensor> lltm_forward(torch::Tensor input) {\n"
            "  CHECK_CUDA(input);\n  return lltm_cuda_forward(input);\n}\n"
            "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"forward\", &lltm_forward); }\n")
LLTM_RUN = ("import torch\nimport lltm\n\nX = torch.randn(16, 32, device='cuda')\n"
            "print(lltm.forward(X)[0].shape)\n")


def test_a_cpp_extension_that_checks_for_cuda_tensors_makes_its_callers_cuda_only(tmp_path, monkeypatch):
    write(tmp_path, {"setup.py": LLTM_SETUP, "lltm.cpp": LLTM_CPP, "run.py": LLTM_RUN})
    assert lint(tmp_path, monkeypatch) == []


def test_a_cpp_extension_with_a_cpu_branch_or_no_check_keeps_the_finding(tmp_path, monkeypatch):
    dispatching = LLTM_CPP.replace("  CHECK_CUDA(input);\n  return lltm_cuda_forward(input);\n",
                                   "  if (input.is_cuda()) { CHECK_CUDA(input); return lltm_cuda_forward(input); }\n"
                                   "  return lltm_cpu_forward(input);\n")
    write(tmp_path, {"setup.py": LLTM_SETUP, "lltm.cpp": dispatching, "run.py": LLTM_RUN})
    assert ("run.py", 4, "DL002") in lint(tmp_path, monkeypatch)
    write(tmp_path, {"lltm.cpp": LLTM_CPP.replace("  CHECK_CUDA(input);\n", "")})
    assert ("run.py", 4, "DL002") in lint(tmp_path, monkeypatch)


KERNELS = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
           "def add_kernel(x_ptr, out_ptr, n):\n    pid = tl.program_id(0)\n\n\n"
           "def add(x):\n    out = torch.empty_like(x)\n    add_kernel[(1,)](x, out, x.numel())\n    return out\n")
KERNEL_USER = ("import torch\nfrom kernels import add\n\n\ndef check():\n    x = torch.randn(8, device=\"cuda\")\n"
               "    torch.testing.assert_close(add(x), x + x)\n")


def test_a_function_calling_a_kernel_wrapper_of_another_module_is_cuda_only(tmp_path, monkeypatch):
    write(tmp_path, {"kernels.py": KERNELS, "test_add.py": KERNEL_USER})
    assert lint(tmp_path, monkeypatch, "test_add.py") == []
    assert summarize(KERNELS.encode()).kernel_functions == ["add"]


def test_a_wrapper_that_launches_on_one_branch_only_guards_no_caller(tmp_path, monkeypatch):
    branchy = KERNELS.replace("    add_kernel[(1,)](x, out, x.numel())\n",
                              "    if x.is_cuda:\n        add_kernel[(1,)](x, out, x.numel())\n")
    write(tmp_path, {"kernels.py": branchy, "test_add.py": KERNEL_USER})
    assert lint(tmp_path, monkeypatch, "test_add.py") == [("test_add.py", 6, "DL002")]


# a device name a script binds at its top and never reads places nothing, unless another
# module of the project imports the script (and may read the name there)
UNREAD_DEVICE = ("import torch\nIS_CUDA = True\nDEVICE = 'cuda' if IS_CUDA else 'cpu'\n"
                 "net = torch.nn.Linear(2, 2)\nprint(net(torch.ones(2)))\n")


@pytest.mark.parametrize("importer, reported", [
    (None, False),
    ("from sim import DEVICE\nimport torch\nprint(torch.ones(2).to(DEVICE))\n", True),
])
def test_a_device_name_a_script_never_reads(tmp_path, monkeypatch, importer, reported):
    write(tmp_path, {"sim.py": UNREAD_DEVICE, **({"run.py": importer} if importer else {})})
    assert (("sim.py", 3, "DL002") in lint(tmp_path, monkeypatch, "sim.py")) is reported
