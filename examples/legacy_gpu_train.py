"""A small legacy GPU-only training script (the kind found in old research repos).

It only runs on a machine with a CUDA GPU: on a laptop or a CPU CI runner it fails with
"Torch not compiled with CUDA enabled". It also "moves" tensors with bare statements whose
results are discarded. `devlint --fix examples/legacy_gpu_train.py` makes it run anywhere.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))
        self.register_buffer("class_weights", torch.ones(n_out))

    def forward(self, x):
        noise = torch.randn(x.shape, device="cuda") * 0.01
        return self.net(x + noise)


features = torch.randn(96, 8)
labels = (features[:, 0] > 0).long() + (features[:, 1] > 0).long()
loader = DataLoader(TensorDataset(features, labels), batch_size=32)

model = MLP(8, 32, 3).cuda()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
criterion.cuda()

for epoch in range(2):
    total = 0.0
    for x, y in loader:
        x.cuda()  # the result is discarded: x stays on the CPU
        y = y.cuda()
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    print(f"epoch {epoch} loss {total / len(loader):.4f}")

with torch.no_grad():
    probe = torch.cuda.FloatTensor([[1.0] * 8, [-1.0] * 8])
    print("predictions", model(probe).argmax(dim=1).tolist())
