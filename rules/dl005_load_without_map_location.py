from __future__ import annotations

import libcst as cst

from devlint.analysis.checkpoints import (HostSaves, cache_written_beside, file_name, host_used_load, project_holds_host,
                                          saved_earlier, zoo_file, is_dataset_class, is_dataset_module, is_library_module, is_test_module, only_into_scaler, package_data_path,
                                          numpy_of_load, path_key, values_read_as_numpy,
                                          attribute_read_as_numpy)
from devlint.analysis.style import string_quote
from devlint.callargs import has_star, keyword, positional_count, with_keyword
from devlint.diagnostic import Applicability
from devlint.facts import call_arg, own_params
from devlint.fixes import choose_device
from devlint.rule import Invalid, Rule, safe, unsafe

LOADERS = {"torch.load": "torch.load", "torch.serialization.load": "torch.load", "torch.jit.load": "torch.jit.load"}


class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Flags `torch.load(...)` and `torch.jit.load(...)` calls that pass no `map_location`
    (neither the keyword nor the positional second argument). `weights_only=True` does
    not count: it says *what* may be unpickled, not *where* tensors go. Calls that
    forward `*args` / `**kwargs` (which may carry `map_location`), calls dominated by a
    CUDA availability check, a load of the file or buffer the same function just wrote
    with `torch.save` / `torch.jit.save` / `m.save` (a round trip in one process: the
    saved devices exist), and other loaders (`torch.hub.load`,
    `load_state_dict_from_url`) are not flagged. Nor are files whose origin says they hold
    host tensors: a torch.hub model-zoo file (`resnet152-b121ed2d.pth`, spelled here or in
    the project constant it comes from); a file of a `%` template the script's own save
    wrote earlier in the run (`'%s_net%d.pth' % (id, k)` saved, `'%s_net1.pth' % id` loaded); a file an earlier call of a project saver was
    handed the location of (`early_stopping(loss, model, path)` ... `torch.load(path +
    "/checkpoint.pth")`: written by the same run); and, where every checkpoint the
    program saves is moved to the host by the saving code, a file no save names (one the
    command line named); and a file the project ships in its tree whose every copy of that
    name is a torch file with CPU storages only (`torch.load('./sanity_data/Ybar_t.pkl')`,
    read without torch: a zip checkpoint's `data.pkl` names where each storage lives; a Git
    LFS pointer or a file with any `cuda` storage keeps the finding). A load whose values the code turns into arrays (`v.numpy()` on
    each, `sd[k].numpy()`, or the load itself: `torch.load(p).numpy()`, also through indexing and views
    that keep the tensor where it is: `torch.load(p)[0].transpose(-1, -2).numpy()`; or an attribute the load is bound to,
    `self.log[:, i].numpy()` in a method of a class that never places `self.log`) holds host tensors
    too: `.numpy()` raises on a CUDA tensor on any machine. A conversion script (it reads with
    `map_location="cpu"` and places nothing; `.to(dtype)` of a dtype parameter is a cast) saves
    host copies, and a load that names that file, directly or through the default of the path
    parameter it reads (`checkpoint_path: Path = Path("checkpoints/model.pth")`), is not flagged.

    ## Why is this bad?
    Without `map_location`, every tensor is restored to the device it was saved from.
    A checkpoint written on a GPU machine then fails to load on a CPU-only machine
    (`Attempting to deserialize object on a CUDA device but torch.cuda.is_available()
    is False`), and one written on `cuda:1` lands on `cuda:1` on a single-GPU box.

    ## Example
    ```python
    state = torch.load("model.pt")
    model.load_state_dict(state)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    state = torch.load("model.pt", map_location=device)
    model.load_state_dict(state)
    ```

    ## Fix safety
    The fix adds `map_location=<device>`: the enclosing function's own `map_location`
    parameter when it has one (it was being ignored), else its `device` parameter, else
    the file's guarded device variable (inserted after the imports when missing; in a
    library module, which has no `__main__` block and runs nothing at import, `"cpu"`
    instead of a new import-time global). A load whose value is used on the host
    (`torch.load(p).tolist()`, `load_state_dict(..., assign=True)`) gets `"cpu"`, and
    so does a whole object (a TorchScript module, a pickled model) loaded by a file
    that has no device variable and names no GPU at all: everything else it makes
    lives on the host, and a loaded module on the GPU would be fed host inputs.
    Loads of a path the file saves only from host values (`torch.save(x.cpu(), p)`; a tensor
    the saving function builds only from host copies, `tot = x.cpu()` then `tot =
    torch.cat((tot, x.cpu()), 0)`;
    a literal path written from a model never moved to a device), the cache idiom
    (`if os.path.isfile(p): x = torch.load(p)` whose other branch builds the value on the host and
    saves it to `p`, also when another module loads that file), and loads in a dataset class (a
    cache of host data; a class deriving the project's own dataset base in another file is one)
    are not flagged: there is nothing to map
    (facts: `devlint/analysis/checkpoints.py`). Another script of the project counts the
    same way when it saves the file under the name the load spells, a formatted name
    matched as a template (`'{}/utt2embedding.pt'.format(args.dir)` saved,
    `'{}/utt2embedding.pt'.format(args.src_dir)` loaded); a template that spells fewer than
    three letters of the name (`'%s.pth' % name`) links nothing.
    It is safe when the loaded object goes straight into `.load_state_dict(...)`:
    `load_state_dict` copies into the module's existing tensors, so where the
    checkpoint is materialised changes nothing but peak memory. Otherwise it is
    unsafe: on a GPU machine a checkpoint saved from CPU tensors now loads onto the
    GPU (code that calls `.numpy()` on it or pins it would break), and one saved on
    `cuda:1` now loads on the chosen device.
    """

    code = "DL005"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # the script's own function saves each net under a `%` template; the load names one of them
        "import torch\nfrom torch import nn\nnets = [nn.Linear(2, 2).cuda(), nn.Linear(2, 2).cuda()]\n"
        "def val(net, k, run_id):\n    save_point = './checkpoint/%s_net%d.pth.tar' % (run_id, k)\n"
        "    torch.save(net.state_dict(), save_point)\nval(nets[0], 1, 'a')\n"
        "nets[0].load_state_dict(torch.load('./checkpoint/%s_net1.pth.tar' % 'a'))\n",
        # every loaded value turned into an array: `.numpy()` works only on host tensors
        "import torch\ndef convert(path, out):\n    sd = torch.load(path)\n    for k, v in sd.items():\n"
        "        out[k] = v.numpy()\n    return out\n",
        "import torch\narr = torch.load('feats.pt').numpy()\n",
        # ... through indexing and views, which keep the tensor where it is
        "import torch\ndef phones(name):\n    return torch.load(name)[0].transpose(-1, -2).numpy()\n",
        "import torch\nx = torch.load('loss.pth')\nx = x['mse'].view(4, -1)[:, :3].numpy()\n",
        # ... or an attribute the class converts in another method, and never places
        "import torch\nclass Log:\n    def __init__(self, d):\n        self.log = torch.Tensor()\n"
        "        if d:\n            self.log = torch.load(d + '/psnr_log.pt')\n"
        "    def add(self, row):\n        self.log = torch.cat([self.log, row])\n"
        "    def plot(self, i):\n        return self.log[:, i].numpy()\n",
        # the script's training function saved that file through a handle: the run reloads its own best model
        "import os\nimport torch\ndef train():\n    model = torch.nn.Linear(2, 2).cuda()\n"
        "    with open(os.path.join(args.work_dir, 'model.pt'), 'wb') as f:\n        torch.save(model, f)\n"
        "    with open(os.path.join(args.work_dir, 'opt.pt'), 'wb') as f:\n        torch.save(model.state_dict(), f)\n"
        "train()\nwith open(os.path.join(args.work_dir, 'model.pt'), 'rb') as f:\n    model = torch.load(f)\n",
        # a torch.hub model-zoo file (the hash suffix of its name): published from host tensors
        "import torch\nimport torchvision\nnet = torchvision.models.resnet50()\n"
        "net.load_state_dict(torch.load('weights/resnet50-19c8e357.pth'))\n",
        "import os\nimport torch\nRES152 = os.path.join('/data/pretrained', 'resnet152-b121ed2d.pth')\n"
        "def build(net):\n    net.load_state_dict(torch.load(RES152))\n",
        "import torch\nstate = torch.load('m.pt', map_location='cpu')\n",
        "import torch\nstate = torch.load('m.pt', 'cpu')\n",
        "import torch\nm = torch.jit.load('m.pt', map_location=torch.device('cpu'))\n",
        "import torch\ndef load(path, **kwargs):\n    return torch.load(path, **kwargs)\n",
        "import torch\ndef load(*args):\n    return torch.load(*args)\n",
        "import torch\nrepo = torch.hub.load('pytorch/vision', 'resnet18')\n",
        "import torch\nif torch.cuda.is_available():\n    state = torch.load('gpu.pt')\n",
        "import pickle\nobj = pickle.load(open('x.pkl', 'rb'))\n",
        "import torch\nloader = torch.load\n",
        "import io\nimport torch\ndef rt(m):\n    buf = io.BytesIO()\n    torch.save(m, buf)\n"
        "    buf.seek(0)\n    return torch.load(buf)\n",
        "import tempfile\nimport torch\nwith tempfile.NamedTemporaryFile() as tmp:\n"
        "    torch.save({}, tmp.name)\n    x = torch.load(tmp.name)\n",
        # the file saves that path only from host values (issue 13 / 16): nothing to map
        "import torch\nfrom torch import nn\nnet = nn.Linear(2, 2)\ntorch.save(net, 'net.pkl')\n"
        "net2 = torch.load('net.pkl')\n",
        "import torch\ndef cache(feats, p):\n    torch.save(feats.cpu(), p)\n"
        "def read(p):\n    return torch.load(p)\n",
        # a module's host copy saved under a computed path, read back under the same name
        "import torch\nclass Base:\n    def save_network(self, net, path):\n        save_path = path + '.pth'\n"
        "        torch.save(net.cpu().state_dict(), save_path)\n"
        "    def load_network(self, net, path):\n        save_path = path + '.pth'\n"
        "        net.load_state_dict(torch.load(save_path))\n",
        "import torch\ndef f():\n    torch.save(torch.zeros(2), 'c.pt')\n    return torch.load('c.pt')\n",
        # every save of the file writes host copies (a list filled with `.to("cpu")` weights):
        # the computed paths it loads are those files
        "import torch\ndef save_weights(model, path):\n    weights = []\n    for p in model.parameters():\n"
        "        weights.append(p.detach().to('cpu').half())\n    torch.save(weights, path)\n"
        "def load_weights(loras):\n    return torch.load(loras)\n",
        # the cache idiom: the file holds what the other branch builds on the host and saves
        "import os\nimport torch\nimport data\nfn = 'corpus.data'\nif os.path.exists(fn):\n    corpus = torch.load(fn)\n"
        "else:\n    corpus = data.Corpus('train.txt')\n    torch.save(corpus, fn)\n",
        "import os\nimport torch\ndef embeds(p, enc):\n    if not os.path.exists(p):\n        e = enc()\n"
        "        torch.save({'e': e.cpu()}, p)\n    return torch.load(p)\n",
        # ... built into the object's own attributes in that branch
        "import os\nimport numpy\nimport torch\nclass Loader:\n    def __init__(self, n, p):\n"
        "        if os.path.exists(p):\n            self.splits = torch.load(p)\n        else:\n"
        "            self.train = numpy.random.permutation(n)\n            torch.save(dict(train=self.train), p)\n",
        # a dataset's cache holds host data
        "import torch\nfrom torch.utils.data import Dataset\nclass Cached(Dataset):\n"
        "    def __init__(self, path):\n        self.data = torch.load(path)\n",
        # a dataset module's own metadata file, written by a function that places nothing
        "import os\nimport torch\nfrom torch.utils.data import Dataset\nMETA = 'meta.bin'\n"
        "class Images(Dataset):\n    pass\n"
        "def parse(root):\n    names = sorted(os.listdir(root))\n    torch.save(names, os.path.join(root, META))\n"
        "def load_meta(root):\n    return torch.load(os.path.join(root, META))\n",
        # in-memory bytes the file pickled from host copies (`lambda t: t.cpu()` over the collection)
        "import io\nimport torch\ndef pack(metrics):\n"
        "    metrics = apply_to_collection(metrics, torch.Tensor, lambda t: t.cpu())\n"
        "    buffer = io.BytesIO()\n    torch.save(metrics, buffer)\n    return {'m': buffer.getvalue()}\n"
        "def unpack(extra):\n    metrics = torch.load(io.BytesIO(extra['m']))\n    return metrics\n",
        # a file shipped inside the package (every user, CPU-only CI too, loads it)
        "import torch\nfrom pathlib import Path\n_W = Path(__file__).resolve().parent / 'weights.pt'\n"
        "def weights():\n    return torch.load(str(_W))\n",
        # a GradScaler's state holds Python numbers only
        "import torch\nclass Trainer:\n    def __init__(self):\n        self.scaler = torch.amp.GradScaler('cuda')\n"
        "    def resume(self, f):\n        state = torch.load(f)\n        self.scaler.load_state_dict(state)\n",
        # XLA tensors are pickled from host copies (`xm.save`)
        "import torch\nimport torch_xla.core.xla_model as xm\ndef load(path):\n    return torch.load(path)\n",
        # ... also when a function of the script writes the script's own path, called in the loop
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ncheckpoint_path = 'checkpoint.pt'\n"
        "def save_checkpoint(final):\n    torch.save({'model': model.state_dict(), 'final': final}, checkpoint_path)\n"
        "for epoch in range(3):\n    if epoch % 2 == 0:\n        save_checkpoint(False)\n"
        "model.load_state_dict(torch.load(checkpoint_path)['model'])\n",
        # the best epoch, saved by this run a few lines up, reloaded after training
        "import torch\ndef fit(model, epochs, train):\n    best = 0\n    for e in range(epochs):\n"
        "        if train(model) > best:\n            torch.save(model.state_dict(), '{}.pkl'.format(e))\n"
        "            best = e\n    model.load_state_dict(torch.load('{}.pkl'.format(best)))\n",
        "import torch\ndef fit(model, path):\n    with open(path, 'wb') as f:\n        torch.save(model, f)\n"
        "    return torch.load(open(path, 'rb'))\n",
    ]
    INVALID = [
        # ... a file of another template than the one the run saved
        Invalid("import torch\nfrom torch import nn\nnets = [nn.Linear(2, 2).cuda(), nn.Linear(2, 2).cuda()]\n"
                "def val(net, k, run_id):\n    save_point = './checkpoint/%s_net%d.pth.tar' % (run_id, k)\n"
                "    torch.save(net.state_dict(), save_point)\nval(nets[0], 1, 'a')\n"
                "nets[0].load_state_dict(torch.load('./pretrained/%s_best.pth' % 'a'))\n",
                "import torch\nfrom torch import nn\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
                "nets = [nn.Linear(2, 2).cuda(), nn.Linear(2, 2).cuda()]\n"
                "def val(net, k, run_id):\n    save_point = './checkpoint/%s_net%d.pth.tar' % (run_id, k)\n"
                "    torch.save(net.state_dict(), save_point)\nval(nets[0], 1, 'a')\n"
                "nets[0].load_state_dict(torch.load('./pretrained/%s_best.pth' % 'a', map_location=device))\n"),
        # a value read with .item() / .tolist() may be a CUDA tensor: nothing says the file is host data
        Invalid("import torch\ndef convert(path, out):\n    sd = torch.load(path)\n    for k, v in sd.items():\n"
                "        out[k] = v.tolist()\n    return out\n"),
        # ... nor does `.numpy()` after `.cpu()`, which accepts a CUDA tensor
        Invalid("import torch\ndef phones(name):\n    return torch.load(name)[0].cpu().numpy()\n"),
        # the class moves the attribute to the GPU itself: its `.numpy()` says nothing of the file
        Invalid("import torch\nclass Log:\n    def __init__(self, d):\n        self.log = torch.load(d + '/log.pt')\n"
                "    def go(self):\n        self.log = self.log.cuda()\n"
                "    def plot(self, i):\n        return self.log[:, i].numpy()\n"),
        # a function of the script that writes where its caller says is no save of the script's path
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "checkpoint_path = 'checkpoint.pt'\ndef save_checkpoint(path):\n"
            "    torch.save({'model': model.state_dict()}, path)\nsave_checkpoint('last.pt')\n"
            "model.load_state_dict(torch.load(checkpoint_path)['model'])\n",
            "import torch\nfrom torch import nn\n"
            "model = nn.Linear(2, 2)\ncheckpoint_path = 'checkpoint.pt'\ndef save_checkpoint(path):\n"
            "    torch.save({'model': model.state_dict()}, path)\nsave_checkpoint('last.pt')\n"
            "model.load_state_dict(torch.load(checkpoint_path, map_location='cpu')['model'])\n",
            unsafe=True,
        ),
        # a list filled with the parameters themselves (not host copies) may hold device tensors
        Invalid(
            "import torch\ndef save_weights(model, path):\n    weights = []\n    for p in model.parameters():\n"
            "        weights.append(p)\n    torch.save(weights, path)\n"
            "def load_weights(loras):\n    return torch.load(loras)\n",
            "import torch\ndef save_weights(model, path):\n    weights = []\n    for p in model.parameters():\n"
            "        weights.append(p)\n    torch.save(weights, path)\n"
            "def load_weights(loras):\n    return torch.load(loras, map_location=\"cpu\")\n",
            unsafe=True,
        ),
        # a cache whose building branch places the model before saving it holds device tensors
        Invalid(
            "import os\nimport torch\ndef cached(p, model):\n    if os.path.exists(p):\n        sd = torch.load(p)\n"
            "    else:\n        model = model.cuda()\n        torch.save(model.state_dict(), p)\n",
            "import os\nimport torch\ndef cached(p, model):\n    if os.path.exists(p):\n"
            "        sd = torch.load(p, map_location=\"cpu\")\n"
            "    else:\n        model = model.cuda()\n        torch.save(model.state_dict(), p)\n",
            unsafe=True,
        ),
        # a value handed in from outside (a parameter) may live anywhere: not a host save
        Invalid(
            "import torch\ndef save(state, p):\n    torch.save(state, p)\ndef load(p):\n    return torch.load(p)\n",
            "import torch\ndef save(state, p):\n    torch.save(state, p)\n"
            "def load(p):\n    return torch.load(p, map_location=\"cpu\")\n",
            unsafe=True,
        ),
        # a path also saved from a placed model is not host-only
        Invalid(
            "import torch\nfrom torch import nn\nnet = nn.Linear(2, 2).cuda()\ntorch.save(net, 'net.pkl')\n"
            "def load():\n    return torch.load('net.pkl')\n",
            "import torch\nfrom torch import nn\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "net = nn.Linear(2, 2).cuda()\ntorch.save(net, 'net.pkl')\n"
            "def load():\n    return torch.load('net.pkl', map_location=device)\n",
            unsafe=True,
        ),
        # a local path or a URL: the local file may be the user's own GPU-trained snapshot (and
        # what `load_url` fetches may hold CUDA tensors too)
        Invalid(
            "import torch\nfrom torch.utils import model_zoo\ndef restore(path):\n"
            "    if path[:4] == 'http':\n        w = model_zoo.load_url(path)\n"
            "    else:\n        w = torch.load(path)\n    return w\n",
        ),
        # ... but a file of another directory (the run to restart from) was not written by this run
        Invalid(
            "import os\nimport torch\ndef train():\n    model = torch.nn.Linear(2, 2).cuda()\n"
            "    with open(os.path.join(args.work_dir, 'model.pt'), 'wb') as f:\n        torch.save(model, f)\n"
            "with open(os.path.join(args.restart_dir, 'model.pt'), 'rb') as f:\n    model = torch.load(f)\ntrain()\n",
        ),
        # the value is used on the host: the only safe target is "cpu"
        Invalid(
            "import torch\nrows = torch.load('feats.pt').tolist()\n",
            "import torch\nrows = torch.load('feats.pt', map_location='cpu').tolist()\n",  # the file's quotes
            unsafe=True,
        ),
        Invalid(
            "import torch\ndef restore(model, path):\n    model.load_state_dict(torch.load(path))\n",
            "import torch\ndef restore(model, path):\n"
            "    model.load_state_dict(torch.load(path, map_location=\"cpu\"))\n",
        ),
        Invalid(
            "import torch\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path), assign=True)\n",
            "import torch\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, map_location=\"cpu\"), assign=True)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
            "model.load_state_dict(torch.load('m.pt'))\n",
            "import torch\nfrom torch import nn\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "model = nn.Linear(2, 2)\nmodel.load_state_dict(torch.load('m.pt', map_location=device))\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "state = torch.load('m.pt', weights_only=True)\n",
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "state = torch.load('m.pt', weights_only=True, map_location=device)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\ndef restore(path, map_location=None):\n    return torch.load(path)\n",
            "import torch\ndef restore(path, map_location=None):\n"
            "    return torch.load(path, map_location=map_location)\n",
            unsafe=True,
        ),
        # a whole module, in a file that names no GPU: its inputs are host tensors, so is the module
        Invalid(
            "from torch import jit\nm = jit.load('traced.pt')\nprint(m(x))\n",
            "from torch import jit\nm = jit.load('traced.pt', map_location='cpu')\nprint(m(x))\n",
            unsafe=True,
        ),
        # the same in a file that feeds it GPU inputs: the new device variable
        Invalid(
            "from torch import jit\nm = jit.load('traced.pt')\nprint(m(x.cuda()))\n",
            "from torch import jit\nimport torch\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "m = jit.load('traced.pt', map_location=device)\nprint(m(x.cuda()))\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(\n        path,\n        weights_only=True,\n    ))\n",
            "import torch\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(\n        path,\n        weights_only=True,\n"
            "        map_location=device,\n    ))\n",
        ),
        # the save writes another file than the one loaded
        Invalid("import torch\ndef fit(model, path, resume):\n    torch.save(model.state_dict(), path)\n"
                "    return torch.load(resume)\n",
                "import torch\ndef fit(model, path, resume):\n    torch.save(model.state_dict(), path)\n"
                "    return torch.load(resume, map_location=\"cpu\")\n", unsafe=True),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._into_state_dict: set = set()
        self._saved: set = set()  # (function, dotted file) written by torch.save / jit.save / m.save
        self._saves: HostSaves | None = None
        self._host_used: set = set()  # loads whose value is used on the host (.numpy(), assign=True)
        self._read_as_numpy: set = set()  # `torch.load(p).numpy()`: works only if the file holds host tensors

    @property
    def _host_saves(self) -> HostSaves:
        """Paths this file saves only from host values: one scan of the file, made the first
        time a load needs it (most files that mention `torch.load` never do)."""
        if self._saves is None:
            self._saves = HostSaves(self.ctx.module)
        return self._saves

    def _note_save(self, node: cst.Call, q) -> bool:
        func = node.func
        target = None
        if q in ("torch.save", "torch.jit.save", "torch.serialization.save"):
            a = call_arg(node, 1, "f")
            target = a.value if a is not None else None
        elif q is None and isinstance(func, cst.Attribute) and func.attr.value == "save":
            a = call_arg(node, 0, "f")
            target = a.value if a is not None else None
        key = path_key(target) if target is not None else None
        if key is None:
            return False
        self._saved.add((self.t.function, key))
        return True

    def _round_trip(self, node: cst.Call) -> bool:
        """Loading what this function itself just saved: the tensors' devices exist here."""
        key = path_key(node.args[0].value)
        return key is not None and (self.t.function, key) in self._saved

    def visit_Attribute(self, node: cst.Attribute) -> None:
        load = host_used_load(node)
        if load is not None:
            self._host_used.add(load)
        if node.attr.value == "numpy":
            load = numpy_of_load(node)  # `torch.load(p).numpy()`, `torch.load(p)[0].transpose(-1, -2).numpy()`
            if load is not None:
                self._read_as_numpy.add(load)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        q = self.facts.qualname(func)
        if self._note_save(node, q):
            return
        load = host_used_load(node)
        if load is not None:
            self._host_used.add(load)
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            for a in node.args:
                if isinstance(a.value, cst.Call) and a.keyword is None:
                    self._into_state_dict.add(a.value)
            return
        loader = LOADERS.get(q or "")
        if loader is None or self.t.guarded or has_star(node) or not node.args:
            return
        if self._round_trip(node) or self._host_saves.holds_host(node.args[0].value):
            return
        if saved_earlier(node, self.t.function or self.ctx.module, self.ctx.module, self.facts.project.savers):
            return  # the same run saved that file a few lines up: it reads back its own tensors
        if cache_written_beside(node, self.t.function or self.ctx.module, self.ctx.module):
            return  # `if exists(p): load(p) else: build; save(v, p)`: a cache of what this code builds on the host
        if self._host_saves.all_explicit and file_name(node.args[0].value) is None:
            return  # a computed path, in a file every save of which writes host copies
        if zoo_file(node.args[0].value, self.ctx.module, self.facts.project):
            return  # a torch.hub model-zoo file (`resnet152-b121ed2d.pth`): published from host tensors
        if project_holds_host(node.args[0].value, self.facts.project, self.t.function, node):
            return  # the project saves that file from host data only (another file's save)
        if is_dataset_class(self.t.cls, self.facts.project):
            return  # a dataset's cache: host data, nothing to map
        if self._host_saves.saves_unplaced and is_dataset_module(self.ctx.module):
            return  # a dataset module's own cache / metadata file, written by functions that place nothing
        if self._host_saves.writes_any and is_test_module(self.ctx.filename, self.ctx.module):
            return  # a test reading back what the test file itself wrote: a round trip in one process
        if self._host_saves.xla:
            return  # XLA tensors are pickled from host copies (`xm.save`): nothing to map
        if package_data_path(node.args[0].value, self.ctx.module):
            return  # a file shipped in the package: every user (CPU-only CI too) loads it, it holds host tensors
        if node in self._read_as_numpy or values_read_as_numpy(node, self.t.function or self.ctx.module):
            return  # `.numpy()` on every loaded value: the file holds host tensors (a CUDA one would raise anyway)
        if attribute_read_as_numpy(node, self.t.cls):
            return  # `self.log = torch.load(p)`, and the class reads `self.log[:, i].numpy()`: the same
        if only_into_scaler(node, self.t.function, self._host_saves.scaler_receivers):
            return  # a GradScaler's state holds Python numbers only
        if keyword(node, "map_location") is not None or positional_count(node) >= 2:
            return
        value, applicability = self._location(node)
        msg = (f"`{loader}` without `map_location`: a checkpoint saved on a GPU cannot be loaded "
               "on a CPU-only machine")
        if value is not None:
            fix_call = with_keyword(node, "map_location", value.expr if hasattr(value, "expr") else value,
                                    quote=string_quote(self.facts.source))
            text = self.ctx.module.code_for_node(fix_call.args[-1].value)
            fmsg = f"pass `map_location={text}`"
            if hasattr(value, "fix"):
                fix = value.fix(applicability, fmsg, {node: fix_call})
            else:
                fix = (safe if applicability is Applicability.SAFE else unsafe)(fmsg, {node: fix_call})
            self.report(node, msg, fix)

    def _location(self, node: cst.Call):
        """The expression to pass as ``map_location`` here, and how safe passing it is."""
        if node in self._host_used:
            # the value is used where it is materialised: only the host keeps that working
            return cst.SimpleString('"cpu"'), Applicability.UNSAFE
        applicability = Applicability.SAFE if node in self._into_state_dict else Applicability.UNSAFE
        fn = self.t.function
        if fn is not None:
            names = [x.name.value for x in own_params(fn)]
            rebound = self.facts.rebound.get(fn, set())
            for wanted in ("map_location", "device"):
                if wanted in names and wanted not in rebound:
                    return cst.Name(wanted), applicability
        choice = choose_device(self.ctx, prefer_input=False)
        if choice.needs_var and node not in self._into_state_dict and not self.facts.names_a_gpu:
            # the file chooses no device and places nothing on a GPU: every value it makes lives
            # on the host, so the loaded object must too (a new device variable would put a
            # loaded module on the GPU beside host inputs: seen on an H100)
            return cst.SimpleString('"cpu"'), applicability
        if choice.needs_var and fn is not None and is_library_module(self.ctx.module):
            # a library module never gets a new import-time device global (issue 16 item 1):
            # the host is the one place every machine has
            return cst.SimpleString('"cpu"'), applicability
        return choice, applicability
