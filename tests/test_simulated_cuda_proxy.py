"""The simulated-CUDA proxy itself: small programs that do and do not mix devices.

Each snippet runs under ``simulated_cuda.install()`` (one subprocess for all of them: the
proxy patches torch for the whole process) and either runs (its own asserts hold) or
raises what a real GPU would raise for it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SIM = HERE / "simulated_cuda.py"
SAME_DEVICE = r"^SimulatedDeviceError: simulated CUDA: Expected all tensors to be on the same device"
NUMPY = r"^SimulatedNumpyError: simulated CUDA: can't convert cuda:0 device type tensor to numpy"

# name: (program, None if it must run / regex the raised "Type: message" must match)
SNIPPETS = {
    # --- placements and what a GPU tensor answers
    "factories_and_moves_are_on_the_gpu": ("""
gpu = torch.ones(2).cuda()
for t in (torch.zeros(2, device="cuda"), torch.ones(2, device=torch.device("cuda", 0)),
          torch.ones(2).to("cuda:0"), torch.ones(2).to(0), torch.ones(2).to(device="cuda"),
          torch.ones(2).to(gpu), torch.ones(2).type_as(gpu), torch.arange(3, device=gpu.device)):
    assert t.is_cuda and t.device == torch.device("cuda", 0) and t.get_device() == 0, t
host = torch.ones(2)
assert not host.is_cuda and host.device.type == "cpu" and host.get_device() == -1
assert gpu.type() == "torch.cuda.FloatTensor" and host.type() == "torch.FloatTensor"
""", None),
    "a_discarded_move_leaves_the_tensor_on_the_host": ("""
x = torch.ones(2)
x.to("cuda")
x.cuda()
assert not x.is_cuda and x.device.type == "cpu"
""", None),
    "cpu_copies_and_leaves_the_gpu_tensor_where_it_is": ("""
gpu = torch.ones(3, device="cuda")
host = gpu.cpu()
assert not host.is_cuda and gpu.is_cuda and host is not gpu
assert not gpu.to("cpu").is_cuda and gpu.to(torch.float64).is_cuda
assert gpu.to("cuda") is gpu
""", None),
    "derived_values_follow": ("""
gpu = torch.randn(4, 3, device="cuda")
for t in (gpu * 2, gpu.sum(), gpu.T, gpu.view(12), gpu.detach(), gpu[0], gpu.float(),
          torch.relu(gpu), gpu.new_zeros(2), torch.zeros_like(gpu), torch.cat([gpu, gpu]),
          gpu.max(dim=0).values, torch.stack([gpu, gpu]), gpu.data):
    assert t.is_cuda, t
assert not gpu.new_zeros(2, device="cpu").is_cuda
assert all(row.is_cuda for row in gpu) and all(c.is_cuda for c in gpu.chunk(2))
assert not any(row.is_cuda for row in torch.ones(2, 2))
""", None),
    # --- mixing devices
    "gpu_plus_host_fails": ("""
a = torch.ones(3).cuda()
b = torch.ones(3)
a + b
""", SAME_DEVICE),
    "host_times_gpu_in_place_fails": ("""
acc = torch.zeros(3)
acc += torch.ones(3, device="cuda")
""", SAME_DEVICE),
    "cat_of_gpu_and_host_fails": ("""
torch.cat([torch.ones(2, device="cuda"), torch.ones(2)])
""", SAME_DEVICE),
    "matmul_of_gpu_and_host_fails": ("""
torch.randn(3, 2).cuda() @ torch.randn(2, 2)
""", SAME_DEVICE),
    "zero_dim_host_scalars_are_allowed": ("""
gpu = torch.ones(3, device="cuda")
scale = torch.tensor(2.0)
out = gpu * scale + torch.tensor(1.0)
assert out.is_cuda and out.tolist() == [3.0, 3.0, 3.0]
assert torch.where(gpu > 0, gpu, torch.tensor(0.0)).is_cuda
""", None),
    "indexing_with_a_host_index_is_allowed": ("""
gpu = torch.arange(6.0, device="cuda")
picked = gpu[torch.tensor([0, 2])]
masked = gpu[torch.tensor([True, False, True, False, True, False])]
gpu[torch.tensor([1])] = 7.0
assert picked.is_cuda and masked.is_cuda and picked.tolist() == [0.0, 2.0] and gpu[1].item() == 7.0
""", None),
    "a_gpu_index_into_a_host_tensor_fails": ("""
torch.arange(6.0)[torch.tensor([0, 2], device="cuda")]
""", r"^SimulatedDeviceError: simulated CUDA: indices should be either on cpu"),
    "copies_across_devices_are_allowed": ("""
host = torch.zeros(3)
host.copy_(torch.ones(3, device="cuda"))
gpu = torch.zeros(3, device="cuda")
gpu.copy_(torch.ones(3))
assert not host.is_cuda and gpu.is_cuda
""", None),
    # --- numpy
    "numpy_of_a_gpu_tensor_fails": ("""
torch.ones(2, device="cuda").numpy()
""", NUMPY),
    "np_asarray_of_a_gpu_tensor_fails": ("""
np.asarray(torch.ones(2, device="cuda"))
""", NUMPY),
    "numpy_after_cpu_is_fine": ("""
gpu = torch.ones(2, device="cuda")
assert gpu.cpu().numpy().tolist() == [1.0, 1.0]
assert gpu.detach().cpu().numpy().sum() == 2.0 and gpu.tolist() == [1.0, 1.0] and gpu.sum().item() == 2.0
assert gpu.numpy(force=True).tolist() == [1.0, 1.0]
""", None),
    # --- modules
    "gpu_module_fed_host_input_fails": ("""
model = nn.Linear(3, 2).cuda()
model(torch.randn(4, 3))
""", SAME_DEVICE),
    "gpu_module_fed_gpu_input_runs": ("""
model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 1)).to("cuda")
out = model(torch.randn(5, 3).to("cuda"))
assert out.is_cuda and all(p.is_cuda for p in model.parameters())
assert all(b.is_cuda for b in model.buffers())
""", None),
    "host_module_fed_gpu_input_fails": ("""
nn.Linear(3, 2)(torch.randn(4, 3, device="cuda"))
""", SAME_DEVICE),
    "embedding_on_the_gpu_with_host_ids_fails": ("""
emb = nn.Embedding(10, 4).cuda()
emb(torch.tensor([[1, 2, 3]]))
""", SAME_DEVICE),
    "a_plain_tensor_attribute_does_not_move_with_the_module": ("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.mask = torch.ones(3)   # not a buffer: Module.to leaves it on the host
    def forward(self, x):
        return self.fc(x) * self.mask
Net().cuda()(torch.randn(2, 3, device="cuda"))
""", SAME_DEVICE),
    "module_moves_back_and_keeps_its_place_through_a_dtype_change": ("""
model = nn.Linear(2, 2)
model(torch.ones(1, 2)).sum().backward()
weight = model.weight
model.to(torch.device("cuda"))
assert model.weight is weight and weight.is_cuda and weight.grad.is_cuda
model.double()
assert model.weight.is_cuda and model.weight.dtype == torch.float64
model.cpu()
assert not model.weight.is_cuda and not model.bias.is_cuda
model.to(torch.ones(1, device="cuda"))
assert model.weight.is_cuda
""", None),
    "a_module_apply_override_moves_its_extra_tensors": ("""
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.stride = torch.ones(2)
        self.register_buffer("scale", torch.ones(2))
    def _apply(self, fn, *args, **kwargs):
        self = super()._apply(fn, *args, **kwargs)
        self.stride = fn(self.stride)
        return self
    def forward(self, x):
        return self.fc(x) * self.stride * self.scale
scale = Head().scale
head = Head().to("cuda")
assert head(torch.ones(1, 2, device="cuda")).is_cuda and head.stride.is_cuda
assert not scale.is_cuda  # Module.to swaps in new buffers: an old reference stays behind
""", None),
    "grads_and_optimizer_state_follow_the_parameters": ("""
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3, device="cuda"), torch.randn(8, 1, device="cuda")
for _ in range(2):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
assert loss.is_cuda and all(p.grad.is_cuda for p in model.parameters())
assert all(s["exp_avg"].is_cuda for s in opt.state.values())
host = nn.Linear(3, 1)
host(torch.randn(2, 3)).sum().backward()
assert not host.weight.grad.is_cuda
(g,) = torch.autograd.grad(model(x).sum(), model[0].weight)
assert g.is_cuda
""", None),
    "parameters_made_from_gpu_tensors_and_copies_are_on_the_gpu": ("""
import copy
w = nn.Parameter(torch.zeros(3, device="cuda"))
assert w.is_cuda
model = nn.Linear(2, 2).cuda()
assert all(p.is_cuda for p in copy.deepcopy(model).parameters())
p = nn.Parameter(torch.zeros(3))
p.data = p.data.to("cuda")
assert p.is_cuda and isinstance(p, nn.Parameter)
""", None),
    "packed_sequences_keep_their_lengths_on_the_host": ("""
lstm = nn.LSTM(3, 4, batch_first=True).cuda()
x = torch.randn(2, 5, 3, device="cuda")
packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]), batch_first=True)
out, _ = lstm(packed)
padded, lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
assert padded.is_cuda and not lengths.is_cuda
""", None),
    # --- TorchScript (seen on an H100: a module loaded onto the GPU fed a host batch)
    "torchscript_module_on_the_gpu_fed_host_input_fails": ("""
import io
buf = io.BytesIO()
torch.jit.save(torch.jit.script(nn.Linear(4, 2)), buf)
buf.seek(0)
m = torch.jit.load(buf, map_location="cuda")
m(torch.randn(3, 4))
""", SAME_DEVICE),
    "torchscript_module_where_its_inputs_are_runs": ("""
import io
buf = io.BytesIO()
torch.jit.save(torch.jit.script(nn.Linear(4, 2)), buf)
buf.seek(0)
m = torch.jit.load(buf, map_location="cuda")
assert m(torch.randn(3, 4, device="cuda")).is_cuda
buf.seek(0)
h = torch.jit.load(buf, map_location="cpu")
assert not h(torch.randn(3, 4)).is_cuda
""", None),
    "torchscript_module_on_the_host_fed_gpu_input_fails": ("""
import io
buf = io.BytesIO()
torch.jit.save(torch.jit.script(nn.Linear(4, 2)), buf)
buf.seek(0)
h = torch.jit.load(buf, map_location="cpu")
h(torch.randn(3, 4, device="cuda"))
""", SAME_DEVICE),
    # --- loading
    "load_places_tensors_where_map_location_says": ("""
import io
buf = io.BytesIO()
torch.save({"w": torch.ones(2, device="cuda"), "h": torch.ones(2)}, buf)
for where, w_gpu, h_gpu in (("cuda", True, True), ("cpu", False, False), (None, True, False)):
    buf.seek(0)
    sd = torch.load(buf, map_location=where) if where else torch.load(buf)
    assert (sd["w"].is_cuda, sd["h"].is_cuda) == (w_gpu, h_gpu), (where, sd)
""", None),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("proxy")
    (d / "snippets.json").write_text(json.dumps({k: v[0] for k, v in SNIPPETS.items()}))
    runner = d / "runner.py"
    runner.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import simulated_cuda\n"
        "simulated_cuda.install()\n"
        "import numpy as np, torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
        "out = {}\n"
        "for name, src in json.load(open(sys.argv[1])).items():\n"
        "    g = {'torch': torch, 'nn': nn, 'F': F, 'np': np, '__name__': '__main__'}\n"
        "    try:\n"
        "        exec(compile(src, name, 'exec'), g)\n"
        "        out[name] = None\n"
        "    except Exception as e:\n"
        "        out[name] = f'{type(e).__name__}: {e}'\n"
        "json.dump(out, open(sys.argv[2], 'w'))\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(runner), str(d / "snippets.json"), str(d / "out.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((d / "out.json").read_text())


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_snippet_runs_or_fails_as_on_a_gpu(results, name):
    expected = SNIPPETS[name][1]
    got = results[name]
    if expected is None:
        assert got is None, got
    else:
        assert got is not None, "ran, but a GPU would refuse it"
        assert re.search(expected, got), got


def _run(tmp_path, src):
    prog = tmp_path / "prog.py"
    prog.write_text(src)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(SIM), str(prog)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)


PROGRAM = """import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1).to(device)
x = torch.randn(8, 4)
{move}
print(model(x).sum().item() == model(x).sum().item())
"""


def test_a_program_feeding_host_batches_to_a_gpu_model_exits_with_the_gpu_error(tmp_path):
    proc = _run(tmp_path, PROGRAM.format(move="x.to(device)  # discarded"))
    assert proc.returncode == 1
    assert "simulated CUDA: Expected all tensors to be on the same device" in proc.stderr
    assert 'prog.py", line 8' in proc.stderr  # the traceback points at the user's line


def test_the_same_program_with_the_batch_moved_runs(tmp_path):
    proc = _run(tmp_path, PROGRAM.format(move="x = x.to(device)"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "True\n"
